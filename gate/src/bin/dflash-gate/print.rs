//! The terminal side of the human report: the VERDICT line that names what failed, the `--quiet`
//! form, colour, and a stdout that tells a reader who left from a report that was lost.
//!
//! The library's [`dflash_gate::Report::to_text`] is the report; this only adds to the verdict line and
//! colours line prefixes. Every line it sees has been through `dflash_gate::__private::escape::line`, so a line's start
//! is the gate's own label, never text from a package: colouring by prefix cannot be steered by a
//! tensor name.

use anstyle::{AnsiColor, Style};
use dflash_gate::{Outcome, Report};
use std::io::{self, Write};

/// `--color`: when to colour the human report.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum When {
    Auto,
    Always,
    Never,
}

impl When {
    pub fn parse(value: &str) -> Result<When, String> {
        match value {
            "auto" => Ok(When::Auto),
            "always" => Ok(When::Always),
            "never" => Ok(When::Never),
            other => Err(format!(
                "--color takes auto, always or never, not \"{other}\""
            )),
        }
    }

    /// Whether to colour stdout. `auto` colours a terminal only, and not under `NO_COLOR` (or
    /// `CLICOLOR=0`, or a dumb terminal), as cargo decides it; `always` colours a pipe too (for
    /// `less -R`).
    pub fn colour_stdout(self) -> bool {
        match self {
            When::Always => true,
            When::Never => false,
            When::Auto => {
                anstream::AutoStream::choice(&io::stdout()) != anstream::ColorChoice::Never
            }
        }
    }
}

/// The verdict line, naming the checks behind a verdict that is not PASS: `VERDICT      FAIL (failed:
/// a, b; undecided: c)`. A PASS line stays `VERDICT      PASS`, as scripts read it.
pub fn verdict_text(report: &Report) -> String {
    let verdict = report.verdict();
    let ids = |outcome: Outcome| -> Vec<&str> {
        report
            .checks()
            .iter()
            .filter(|c| c.outcome() == outcome)
            .map(|c| c.id())
            .collect()
    };
    let mut named = Vec::new();
    for (outcome, word) in [(Outcome::Fail, "failed"), (Outcome::Undecided, "undecided")] {
        let ids = ids(outcome);
        if !ids.is_empty() {
            named.push(format!("{word}: {}", ids.join(", ")));
        }
    }
    let line = if named.is_empty() {
        format!("VERDICT      {verdict}")
    } else {
        format!("VERDICT      {verdict} ({})", named.join("; "))
    };
    dflash_gate::__private::escape::line(&line)
}

/// The human report of one package: the library's text with the verdict line naming what failed, or
/// (`quiet`) [`quiet_text`].
pub fn report_text(report: &Report, census: bool, quiet: bool) -> String {
    if quiet {
        return quiet_text(report);
    }
    let plain = format!("VERDICT      {}", report.verdict());
    let mut out = String::new();
    for line in report.to_text(census).lines() {
        if line == plain {
            out.push_str(&verdict_text(report));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// `--quiet`: the package and its verdict on one line (a loop over packages reads one line each),
/// then each check that failed or could not decide on its own, once. The checks a failure stopped
/// are one line per check that stopped them: nine copies of "the weight file did not parse" say
/// nothing the first objection did not.
pub fn quiet_text(report: &Report) -> String {
    let text = report.to_text(false);
    let mut objections = Vec::new();
    let (mut failed, mut undecided) = (Vec::new(), Vec::new());
    // Stopping check and how many it stopped, in the order first met.
    let mut blocked: Vec<(&str, usize)> = Vec::new();
    // The report's lines after its first are its checks', one each, in order.
    let header = 1 + report.against().lines().len();
    for (check, line) in report.checks().iter().zip(text.lines().skip(header)) {
        match (check.outcome(), check.blocked_by()) {
            (Outcome::Pass, _) => {}
            (_, Some(by)) => match blocked.iter_mut().find(|(b, _)| *b == by) {
                Some((_, n)) => *n += 1,
                None => blocked.push((by, 1)),
            },
            (outcome, None) => {
                objections.push(line);
                match outcome {
                    Outcome::Fail => failed.push(check.id()),
                    _ => undecided.push(check.id()),
                }
            }
        }
    }
    let mut named = Vec::new();
    if !failed.is_empty() {
        named.push(format!("failed: {}", failed.join(", ")));
    }
    if !undecided.is_empty() {
        named.push(format!("undecided: {}", undecided.join(", ")));
    }
    let stopped: usize = blocked.iter().map(|(_, n)| n).sum();
    if stopped > 0 {
        named.push(format!("{stopped} blocked"));
    }
    let total = report.checks().len();
    let detail = match named.is_empty() {
        true => format!("{} of {total} {} passed", report.passed(), checks(total)),
        false => named.join("; "),
    };
    let verdict = report.verdict();
    let head = format!("{:<10} {}  {detail}", verdict.label(), report.package());
    let mut out = format!("{}\n", dflash_gate::__private::escape::line(&head));
    for line in objections {
        out.push_str(line);
        out.push('\n');
    }
    for (by, n) in blocked {
        let line = format!("{:<10} {n} {} blocked by {by}", "UNDECIDED", checks(n));
        out.push_str(&dflash_gate::__private::escape::line(&line));
        out.push('\n');
    }
    out
}

/// `--format github`: a GitHub workflow command per check that failed (`::error`) or could not
/// decide (`::warning`) on its own, as `--quiet` lists them (a check another one stopped adds
/// nothing the stopping one did not say). The Actions run shows each on its summary page, titled by
/// the check, which a log of reports leaves the reader to find.
pub fn annotations(report: &Report) -> String {
    let mut out = String::new();
    for check in report.checks() {
        let command = match (check.outcome(), check.blocked_by()) {
            (_, Some(_)) | (Outcome::Pass, _) => continue,
            (Outcome::Fail, None) => "error",
            (_, None) => "warning",
        };
        out.push_str(&annotation(
            command,
            &format!("dflash-gate {}", check.id()),
            &format!("{}: {}", report.package(), check.message()),
        ));
    }
    out
}

/// `--format github` for a fit report whose draft fits none of its targets: one `::error` (one
/// `::warning` when what kept it from fitting could not be decided); the table says which and why.
pub fn fit_annotation(draft: &str, code: u8) -> String {
    let (command, said) = match code {
        3 => (
            "warning",
            "cannot tell whether it fits any of the targets given",
        ),
        2 => ("error", "none of the targets given could be read"),
        _ => ("error", "fits none of the targets given"),
    };
    annotation(command, "dflash-gate fit", &format!("{draft}: {said}"))
}

/// `--format github` for a package the gate could not run on: one `::error`, its message the
/// error's own (which names the path).
pub fn error_annotation(why: &str) -> String {
    annotation("error", "dflash-gate could not run", why)
}

/// One workflow command line, its title and message escaped as the runner unescapes them: a `%`, CR
/// or LF in a message (and also `:` or `,` in a property) would otherwise end or split the command.
fn annotation(command: &str, title: &str, message: &str) -> String {
    // Escaped as every report line is first (a forged command after a newline stays inside this one).
    let data = |text: &str| {
        dflash_gate::__private::escape::line(text)
            .replace('%', "%25")
            .replace('\r', "%0D")
            .replace('\n', "%0A")
    };
    let property = |text: &str| data(text).replace(':', "%3A").replace(',', "%2C");
    format!("::{command} title={}::{}\n", property(title), data(message))
}

/// "check" or "checks", for `n` of them.
fn checks(n: usize) -> &'static str {
    match n {
        1 => "check",
        _ => "checks",
    }
}

/// The terminal's width in columns, when stdout is a terminal that says it; `None` for a pipe or a
/// file, which get the plain lines (byte for byte what the golden report and scripts read).
pub fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !io::stdout().is_terminal() {
        return None;
    }
    // SAFETY: a zeroed `winsize` is a valid value; `TIOCGWINSZ` on stdout writes one into it and
    // nothing else.
    let size = unsafe {
        let mut size: libc::winsize = std::mem::zeroed();
        (libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) == 0).then_some(size)
    };
    size.map(|s| usize::from(s.ws_col)).filter(|&w| w > 0)
}

/// `text` with every line longer than `width` columns wrapped at spaces, its continuation lines
/// indented under the column where the line's message starts (a check's message, a package's
/// detail), so the labels and ids stay a column of their own. Joined back with single spaces, the
/// lines are the plain report's (a word longer than a line is cut, not lost).
pub fn wrap(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for line in text.lines() {
        if line.chars().count() <= width {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        // At most half the width goes to the indent: the message keeps room to read.
        let indent = hanging_indent(line).min(width / 2);
        let mut rest = line;
        let mut room = width;
        loop {
            if rest.chars().count() <= room {
                out.push_str(rest);
                out.push('\n');
                break;
            }
            // The last space that leaves the piece within `room` columns, past the indent of the
            // first piece (never a break inside the label and id columns); else a cut at `room`.
            let limit = rest.char_indices().nth(room).map_or(rest.len(), |(i, _)| i);
            let floor = if room == width { indent } else { 1 };
            let at = rest[..limit]
                .rfind(' ')
                .filter(|&i| i >= floor)
                .map_or((limit, limit), |i| (i, i + 1));
            out.push_str(rest[..at.0].trim_end());
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            rest = &rest[at.1..];
            room = width - indent;
        }
    }
    out
}

/// Where a long line's message starts: after a check line's label and id, or a package line's label
/// and name (the first run of two spaces past the label column); after `NOT CHECKED` or `VERDICT`;
/// otherwise two past the line's own indent.
fn hanging_indent(line: &str) -> usize {
    const LABEL: usize = 11;
    if line.starts_with("NOT CHECKED  ") || line.starts_with("VERDICT  ") {
        return 13;
    }
    if style_of(line).is_some() {
        if let Some(gap) = line.get(LABEL..).and_then(|rest| rest.find("  ")) {
            let start = LABEL + gap;
            let spaces = line[start..].len() - line[start..].trim_start().len();
            return start + spaces;
        }
        return LABEL;
    }
    line.len() - line.trim_start().len() + 2
}

/// The style of a line by its label, or `None` for a line left plain.
fn style_of(line: &str) -> Option<(usize, Style)> {
    let bold = Style::new().bold();
    let colour = |c: AnsiColor| Style::new().fg_color(Some(c.into()));
    [
        ("PASS", colour(AnsiColor::Green)),
        ("FAIL", colour(AnsiColor::Red).bold()),
        ("UNDECIDED", colour(AnsiColor::Yellow).bold()),
        ("ERROR", colour(AnsiColor::Red).bold()),
        ("SKIPPED", Style::new().dimmed()),
        ("NOT CHECKED", Style::new().dimmed()),
        ("VERDICT      PASS", colour(AnsiColor::Green).bold()),
        ("VERDICT      FAIL", colour(AnsiColor::Red).bold()),
        ("VERDICT      UNDECIDED", colour(AnsiColor::Yellow).bold()),
        ("VERDICT", bold),
    ]
    .into_iter()
    .filter(|(label, _)| {
        line.strip_prefix(label)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
    })
    .max_by_key(|(label, _)| label.len())
    .map(|(label, style)| (label.len(), style))
}

/// `text` with each line's label coloured (when `colour`); the rest of every line untouched.
pub fn paint(text: &str, colour: bool) -> String {
    if !colour {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        match style_of(line.trim_end_matches('\n')) {
            Some((len, style)) => {
                out.push_str(&format!("{style}{}{style:#}", &line[..len]));
                out.push_str(&line[len..]);
            }
            None => out.push_str(line),
        }
    }
    out
}

/// Stdout that remembers its first write error and then writes no more.
///
/// A closed pipe (`dflash-gate --all models | head -1`) is the reader's choice, not a lost report:
/// the run goes on, quietly, to its verdict's own exit status (ripgrep does the same, but a gate must
/// not let an early exit 0 hide a FAIL later in the list, so every package is still gated). Any
/// other write error (a full disk) loses the report: exit 2.
pub struct Out<W: Write> {
    inner: W,
    pub error: Option<io::Error>,
}

impl<W: Write> Out<W> {
    pub fn new(inner: W) -> Self {
        Out { inner, error: None }
    }

    /// Writes `text` unless an earlier write failed; whether it was written.
    pub fn write(&mut self, text: &str) -> bool {
        if self.error.is_some() {
            return false;
        }
        match self.inner.write_all(text.as_bytes()) {
            Ok(()) => true,
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }

    pub fn flush(&mut self) {
        if self.error.is_none() {
            if let Err(e) = self.inner.flush() {
                self.error = Some(e);
            }
        }
    }

    /// The report was lost (an error other than a closed pipe): nothing more is worth gating.
    pub fn lost(&self) -> bool {
        self.error
            .as_ref()
            .is_some_and(|e| e.kind() != io::ErrorKind::BrokenPipe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_annotation_is_one_line_whatever_its_message_holds() {
        let line = annotation("error", "t: a, b", "50% off\n::error title=x::forged\r");
        assert_eq!(line.matches('\n').count(), 1, "{line:?}");
        assert!(line.ends_with('\n') && !line.contains('\r'), "{line:?}");
        assert!(
            line.starts_with("::error title=t%3A a%2C b::50%25 off"),
            "{line:?}"
        );
    }

    #[test]
    fn only_the_label_is_coloured_and_plain_text_is_untouched() {
        let text =
            "PASS       a.b  ok\nFAIL       c.d  bad\nVERDICT      FAIL (failed: c.d)\nPASSING x\n";
        assert_eq!(paint(text, false), text);
        let painted = paint(text, true);
        let lines: Vec<&str> = painted.lines().collect();
        assert!(
            lines[0].starts_with("\u{1b}[") && lines[0].ends_with("PASS\u{1b}[0m       a.b  ok"),
            "{painted:?}"
        );
        assert!(
            lines[2].contains("VERDICT      FAIL\u{1b}[0m (failed"),
            "{painted:?}"
        );
        // A word that only begins with a label is not one.
        assert_eq!(lines[3], "PASSING x");
    }
}
