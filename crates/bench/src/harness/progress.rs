//! The progress display: a bar of the run's time against its estimate, a spinner naming
//! the measurement under way, and one printed line per finished measurement. On a
//! terminal the bars are drawn by indicatif on stderr; elsewhere (CI, a pipe) only the
//! lines are printed, so logs stay readable.

use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Progress of a run.
#[derive(Debug)]
pub struct Progress {
    mp: MultiProgress,
    overall: ProgressBar,
    current: ProgressBar,
    visible: bool,
    quiet: bool,
    start: Instant,
}

impl Progress {
    /// A display for a run expected to take `estimate`.
    pub fn new(estimate: Duration) -> Progress {
        let visible = std::io::stderr().is_terminal();
        let target = if visible {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let mp = MultiProgress::with_draw_target(target);
        let overall = mp.add(ProgressBar::new(estimate.as_secs().max(1)));
        overall.set_style(
            ProgressStyle::with_template(
                "{prefix:.bold} [{bar:40.cyan/blue}] {elapsed_precise} of ~{len}s estimated",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        overall.set_prefix("ulnet bench");
        let current = mp.add(ProgressBar::new_spinner());
        current
            .set_style(ProgressStyle::with_template("  {spinner} {msg}").expect("valid template"));
        if visible {
            current.enable_steady_tick(Duration::from_millis(200));
        }
        Progress {
            mp,
            overall,
            current,
            visible,
            quiet: false,
            start: Instant::now(),
        }
    }

    /// A display that draws nothing and prints nothing (tests).
    pub fn silent() -> Progress {
        let mp = MultiProgress::with_draw_target(ProgressDrawTarget::hidden());
        let overall = mp.add(ProgressBar::hidden());
        let current = mp.add(ProgressBar::hidden());
        Progress {
            mp,
            overall,
            current,
            visible: false,
            quiet: true,
            start: Instant::now(),
        }
    }

    fn advance(&self) {
        let s = self.start.elapsed().as_secs();
        let len = self.overall.length().unwrap_or(1);
        // Past the estimate the bar stays one short of full until the run ends.
        self.overall.set_position(s.min(len.saturating_sub(1)));
    }

    /// Names the measurement under way.
    pub fn status(&self, msg: &str) {
        self.advance();
        self.current.set_message(msg.to_owned());
    }

    /// Prints one finished measurement (above the bars on a terminal).
    pub fn line(&self, msg: &str) {
        self.advance();
        if self.visible {
            let _ = self.mp.println(msg);
        } else if !self.quiet {
            eprintln!("{msg}");
        }
    }

    /// Marks one measurement done.
    pub fn tick_done(&self) {
        self.advance();
    }

    /// Ends the display.
    pub fn finish(&self) {
        self.current.finish_and_clear();
        self.overall.finish_and_clear();
    }
}
