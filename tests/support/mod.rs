//! What several test files share: the binary under test, run as a user runs it.

pub mod onnx;

/// The `pipeopt` binary cargo built for the tests, as a command to run.
pub fn pipeopt() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("pipeopt").unwrap()
}

/// The `pipeopt` binary cargo built for the tests.
pub fn exe() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_BIN_EXE_pipeopt"))
}

/// `args` run with stdout on a pipe whose reader is already gone.
#[cfg(unix)]
pub fn run_with_closed_stdout(args: &[&str]) -> std::process::Output {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into the array, which we then own.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    std::process::Command::new(exe())
        .args(args)
        .stdout(std::process::Stdio::from(write))
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap()
}
