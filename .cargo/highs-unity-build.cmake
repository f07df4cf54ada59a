# Read by CMake when `highs-sys` builds HiGHS (through CMAKE_TOOLCHAIN_FILE, set in
# .cargo/config.toml): compile its sources as a unity build, 32 files to a translation unit.
# No compiler or platform setting: CMake finds those as it does without this file.
set(CMAKE_UNITY_BUILD ON)
set(CMAKE_UNITY_BUILD_BATCH_SIZE 32)
