//! How both binaries show an error: what failed, then each cause, then every hint, last.
//!
//! A hint is advice the user can act on. An error carries it after its message, on a line of
//! its own that starts `hint: ` ([`HINT`]); [`render`] takes the hints out of every cause and
//! prints them after the whole chain, once each, so the advice is the last thing on screen.

use std::error::Error;

/// What starts a hint inside an error's message.
pub const HINT: &str = "\nhint: ";

/// The message `message` with the advice `hint` attached.
pub fn with_hint(message: impl std::fmt::Display, hint: impl std::fmt::Display) -> String {
    format!("{message}{HINT}{hint}")
}

/// The error and each cause on one line, `what: why: why`, for a message inside another's.
pub fn chain(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(current) = cause {
        text.push_str(": ");
        text.push_str(&current.to_string());
        cause = current.source();
    }
    text
}

/// `error: …`, `  caused by: …` for each cause, then `hint: …` for each hint in the chain.
pub fn render(error: &(dyn Error + 'static)) -> String {
    let mut text = String::new();
    let mut hints: Vec<String> = Vec::new();
    let mut cause = Some(error);
    let mut depth = 0;
    while let Some(current) = cause {
        let message = current.to_string();
        let (body, hint) = match message.split_once(HINT) {
            Some((body, hint)) => (body.to_string(), Some(hint.to_string())),
            None => (message, None),
        };
        if depth == 0 {
            text.push_str(&format!("error: {body}"));
        } else {
            text.push_str(&format!("\n  caused by: {body}"));
        }
        for hint in hint
            .into_iter()
            .flat_map(|hint| hint.split(HINT).map(str::to_string).collect::<Vec<_>>())
        {
            if !hints.contains(&hint) {
                hints.push(hint);
            }
        }
        cause = current.source();
        depth += 1;
    }
    for hint in hints {
        text.push_str(&format!("\nhint: {hint}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{message}")]
    struct Failure {
        message: String,
        #[source]
        source: Option<Box<Failure>>,
    }

    fn failure(message: &str, source: Option<Failure>) -> Failure {
        Failure {
            message: message.to_string(),
            source: source.map(Box::new),
        }
    }

    #[test]
    fn hints_of_every_cause_come_last_once_each() {
        let error = failure(
            &with_hint("the install did not finish", "run it again"),
            Some(failure(
                &with_hint("no container runtime answers", "start containerd"),
                Some(failure(
                    &with_hint("socket missing", "start containerd"),
                    None,
                )),
            )),
        );
        assert_eq!(
            render(&error),
            "error: the install did not finish\n  caused by: no container runtime answers\n  \
             caused by: socket missing\nhint: run it again\nhint: start containerd"
        );
    }

    #[test]
    fn a_message_without_hints_is_shown_whole() {
        let error = failure("first line\nsecond line", None);
        assert_eq!(render(&error), "error: first line\nsecond line");
    }
}
