//! The executor and the profiler on the CPU, through the library's public paths (as a user's
//! code would call them). They are unit tests of the library rather than integration tests
//! so that the libtorch tier builds no second `pipeopt` binary: cargo builds the binaries for
//! every integration test, and a binary with libtorch is 53 MB that these tests never run.

mod executor;
mod profile;
