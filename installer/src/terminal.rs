//! Questions asked on the controlling terminal (`/dev/tty`), which stays the user's even when
//! standard input and output are piped (`curl | sudo bash`).

use std::io::{BufRead as _, Write as _};

/// Writes `question` on the terminal and returns the line typed, trimmed; `None` where there
/// is no terminal to ask on.
pub fn ask(question: &str) -> Option<String> {
    let mut tty = fs_err::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .ok()?;
    let mut answer = String::new();
    // Ctrl-C at the question (or before it) ends Berth then and there.
    let _ = crate::interrupt::while_asking(|| {
        let _ = write!(tty, "{question}");
        std::io::BufReader::new(tty).read_line(&mut answer)
    });
    Some(answer.trim().to_string())
}
