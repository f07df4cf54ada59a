//! Build script. Does nothing unless the `torch` feature is on; then, for the libtorch that
//! torch-sys links (the `LIBTORCH` directory, see `.ci/setup-torch.sh`):
//! - writes an rpath to `$LIBTORCH/lib` into every binary and test of this crate, so they find
//!   libtorch at run time without `LD_LIBRARY_PATH`;
//! - compiles `src/exec/alloc_stats.cpp` (the caching allocator's statistics, which tch does
//!   not expose) against libtorch's headers;
//! - with `PIPEOPT_LINK_CUDA=1` (GPU builds), links `libtorch_cuda` with `--no-as-needed`.
//!   torch-sys asks for it too, but the linker's default `--as-needed` drops it because no Rust
//!   code calls into it directly, and without it libtorch reports no CUDA device. CPU builds
//!   leave the variable unset, so they do not need the NVIDIA libraries libtorch_cuda depends on.
use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-env-changed=PIPEOPT_LINK_CUDA");
    println!("cargo:rerun-if-changed=src/exec/alloc_stats.cpp");
    if env::var_os("CARGO_FEATURE_TORCH").is_none() {
        return;
    }
    let Some(libtorch) = env::var_os("LIBTORCH") else {
        panic!(
            "feature `torch` needs LIBTORCH (the libtorch directory, for its headers and \
             libraries): run `source .ci/setup-torch.sh` first"
        );
    };
    let root = PathBuf::from(libtorch);
    #[cfg(feature = "torch")]
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .include(root.join("include"))
        .include(root.join("include/torch/csrc/api/include"))
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .flag_if_supported("-w")
        .file("src/exec/alloc_stats.cpp")
        .compile("pipeopt_alloc_stats");
    let lib = root.join("lib");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    if env::var("PIPEOPT_LINK_CUDA").as_deref() == Ok("1") {
        if lib.join("libtorch_cuda.so").exists() {
            println!("cargo:rustc-link-arg=-L{}", lib.display());
            // libtorch_cuda's own CUDA dependencies (cuBLAS, cuDNN...) are found at run time
            // on the GPU machine; the build machine need not have them.
            println!("cargo:rustc-link-arg=-Wl,--allow-shlib-undefined");
            println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
            println!("cargo:rustc-link-arg=-ltorch_cuda");
            println!("cargo:rustc-link-arg=-Wl,--as-needed");
        } else {
            println!(
                "cargo:warning=PIPEOPT_LINK_CUDA=1 but {} has no libtorch_cuda.so",
                lib.display()
            );
        }
    }
}
