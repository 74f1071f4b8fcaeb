//! Progress bars on stderr; drawn only when stderr is a terminal.

use std::io::IsTerminal;

use berth_build::reporter::{Progress, Reporter};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Bars {
    multi: MultiProgress,
}

impl Bars {
    pub fn new() -> Self {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        Self {
            multi: MultiProgress::with_draw_target(target),
        }
    }
}

struct Bar(ProgressBar);

impl Reporter for Bars {
    fn start(&self, label: &str, total: Option<u64>) -> Box<dyn Progress> {
        let bar = match total {
            Some(total) => ProgressBar::new(total).with_style(
                ProgressStyle::with_template(
                    "{msg:32!} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            ),
            None => ProgressBar::no_length().with_style(
                ProgressStyle::with_template("{msg:32!} {bytes} {bytes_per_sec}")
                    .expect("valid template"),
            ),
        };
        let bar = self.multi.add(bar.with_message(label.to_string()));
        Box::new(Bar(bar))
    }
}

impl Progress for Bar {
    fn advance(&self, bytes: u64) {
        self.0.inc(bytes);
    }

    fn finish(&self) {
        self.0.finish_and_clear();
    }
}
