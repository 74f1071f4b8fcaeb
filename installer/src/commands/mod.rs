pub mod install;
pub mod kustomization;
pub mod node;
pub mod status;
pub mod unpack;

/// Reports a run's steps on standard error, as `berth: …` lines.
pub struct Stderr;

impl berth::engine::Reporter for Stderr {
    fn step(&self, message: &str) {
        say!("berth: {message}");
    }
}

/// Prints an error with every cause; a cause's `hint:` lines stay at the end.
pub fn print_error(error: &anyhow::Error) {
    let mut hints = Vec::new();
    let mut text = String::new();
    for (depth, cause) in error.chain().enumerate() {
        let message = cause.to_string();
        let (body, hint) = match message.split_once("\nhint: ") {
            Some((body, hint)) => (body.to_string(), Some(hint.to_string())),
            None => (message, None),
        };
        if depth == 0 {
            text.push_str(&format!("error: {body}"));
        } else {
            text.push_str(&format!("\n  caused by: {body}"));
        }
        hints.extend(hint);
    }
    say!("{text}");
    for hint in hints {
        say!("hint: {hint}");
    }
}
