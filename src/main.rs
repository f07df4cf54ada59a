//! The `pipeopt` command line: parse, call the library, print JSON or a table. Nothing else.
//!
//! Exit status (README, "Exit status"): 0 when a result was produced, "infeasible"
//! included; 1 when a plan is invalid (`validate`), an algorithm or solver failed, or a
//! file (stdout included) could not be written; 2 on bad input (the message names the file
//! and the field). The library says which ([`pipeopt::Error::exit_code`]); `anyhow` only
//! carries its errors, and those of serde, up to here.

use std::process::ExitCode;

mod cli;

use pipeopt::InputError;

fn main() -> ExitCode {
    let cli = match cli::command::parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    // `println!` panics when stdout is closed (`| head -3`) or full (`> /dev/full`). Such a
    // panic is not a bug: a closed pipe ends the command quietly (the reader has what it
    // wanted, as in ripgrep), a full disk is a failed write (exit status 1).
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if stdout_failure(info.payload()).is_none() {
            default_hook(info)
        }
    }));
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cli::command::run(cli.command)
    })) {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit_code(&e))
        }
        Err(payload) => match stdout_failure(payload.as_ref()) {
            Some(m) if m.contains("Broken pipe") => ExitCode::SUCCESS,
            Some(m) => {
                eprintln!("error: stdout: {m}");
                ExitCode::from(1)
            }
            None => std::panic::resume_unwind(payload),
        },
    }
}

/// The exit status for an error: the library's kind ([`pipeopt::Error::exit_code`]: 2 for
/// bad input, 1 otherwise), 2 for bad input found here, 1 for anything else.
fn exit_code(e: &anyhow::Error) -> u8 {
    if let Some(e) = e.downcast_ref::<pipeopt::Error>() {
        e.exit_code()
    } else if e.downcast_ref::<InputError>().is_some() {
        2
    } else {
        1
    }
}

/// The message of a panic raised by `println!` failing to write stdout, if it is one.
fn stdout_failure(payload: &(dyn std::any::Any + Send)) -> Option<String> {
    let text = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))?;
    text.strip_prefix("failed printing to stdout: ")
        .map(str::to_string)
}
