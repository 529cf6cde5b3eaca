//! Writer for the xplot `.xpl` text format, the one tcptrace emits and xplot (and
//! jPlot, xpl2gpl) read.
//!
//! The format, as xplot documents it: the first line names the x and y coordinate types
//! (`double`, `signed`, `unsigned`, `timeval` — seconds and microseconds since the epoch
//! written `sec.usec`); then commands, one per line: `title`, `xlabel` and `ylabel` each
//! followed by a line of text; a colour name on its own line (`white`, `green`, `red`,
//! `blue`, `yellow`, `purple`, `orange`, `magenta`, `pink`) sets the colour of what follows;
//! `line x1 y1 x2 y2` and `dline` (dotted) draw segments; `x`, `dot`, `plus`, `box`,
//! `diamond`, the arrows `uarrow darrow larrow rarrow` and the ticks `utick dtick ltick rtick
//! htick vtick` take one point; the text commands `atext btext ltext rtext ctext` take a point
//! and read their text from the next line (above, below, left of, right of, centred on the
//! point); `go` ends the file. This module only writes; it has no reader.

use crate::{write_file, ReportError};
use std::fmt::Write as _;
use std::path::Path;

/// A coordinate type named on the header line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XplotAxis {
    Double,
    Signed,
    Unsigned,
    /// Absolute time, `sec.usec`.
    Timeval,
}

impl XplotAxis {
    pub fn keyword(self) -> &'static str {
        match self {
            XplotAxis::Double => "double",
            XplotAxis::Signed => "signed",
            XplotAxis::Unsigned => "unsigned",
            XplotAxis::Timeval => "timeval",
        }
    }
}

/// The colours xplot knows by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XplotColor {
    White,
    Green,
    Red,
    Blue,
    Yellow,
    Purple,
    Orange,
    Magenta,
    Pink,
}

impl XplotColor {
    pub fn keyword(self) -> &'static str {
        match self {
            XplotColor::White => "white",
            XplotColor::Green => "green",
            XplotColor::Red => "red",
            XplotColor::Blue => "blue",
            XplotColor::Yellow => "yellow",
            XplotColor::Purple => "purple",
            XplotColor::Orange => "orange",
            XplotColor::Magenta => "magenta",
            XplotColor::Pink => "pink",
        }
    }
}

/// One drawing command. x values are seconds relative to the plot's origin (see
/// [`Xplot::origin`]); y values are in the y axis's unit.
#[derive(Clone, Debug, PartialEq)]
pub enum XplotCommand {
    Line(f64, f64, f64, f64),
    DLine(f64, f64, f64, f64),
    X(f64, f64),
    Dot(f64, f64),
    Plus(f64, f64),
    Box(f64, f64),
    Diamond(f64, f64),
    UArrow(f64, f64),
    DArrow(f64, f64),
    LArrow(f64, f64),
    RArrow(f64, f64),
    UTick(f64, f64),
    DTick(f64, f64),
    LTick(f64, f64),
    RTick(f64, f64),
    HTick(f64, f64),
    VTick(f64, f64),
    /// Text above the point.
    AText(f64, f64, String),
    /// Text below the point.
    BText(f64, f64, String),
    /// Text left of the point.
    LText(f64, f64, String),
    /// Text right of the point.
    RText(f64, f64, String),
    /// Text centred on the point.
    CText(f64, f64, String),
}

/// An xplot file: header, labels and coloured commands.
#[derive(Clone, Debug, PartialEq)]
pub struct Xplot {
    pub x_axis: XplotAxis,
    pub y_axis: XplotAxis,
    /// For a `timeval` x axis: the absolute time of x = 0, as (seconds, nanoseconds) since the
    /// Unix epoch. Ignored for other axis types.
    pub origin: Option<(u64, u32)>,
    pub title: String,
    pub xlabel: String,
    pub ylabel: String,
    pub items: Vec<(XplotColor, XplotCommand)>,
}

impl Xplot {
    pub fn new(x_axis: XplotAxis, y_axis: XplotAxis) -> Xplot {
        Xplot {
            x_axis,
            y_axis,
            origin: None,
            title: String::new(),
            xlabel: String::new(),
            ylabel: String::new(),
            items: Vec::new(),
        }
    }

    pub fn push(&mut self, color: XplotColor, command: XplotCommand) {
        self.items.push((color, command));
    }

    /// The file's text. A colour line is written only when the colour changes.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{} {}", self.x_axis.keyword(), self.y_axis.keyword());
        for (key, text) in [
            ("title", &self.title),
            ("xlabel", &self.xlabel),
            ("ylabel", &self.ylabel),
        ] {
            let _ = writeln!(out, "{key}\n{}", one_line(text));
        }
        let mut current: Option<XplotColor> = None;
        for (color, cmd) in &self.items {
            if current != Some(*color) {
                let _ = writeln!(out, "{}", color.keyword());
                current = Some(*color);
            }
            self.write_command(&mut out, cmd);
        }
        out.push_str("go\n");
        out
    }

    pub fn write(&self, path: &Path) -> Result<(), ReportError> {
        write_file(path, self.to_text().as_bytes())
    }

    fn write_command(&self, out: &mut String, cmd: &XplotCommand) {
        use XplotCommand as C;
        let xy = |x: f64, y: f64| format!("{} {}", self.x(x), self.y(y));
        let (word, args, text) = match cmd {
            C::Line(x1, y1, x2, y2) => ("line", format!("{} {}", xy(*x1, *y1), xy(*x2, *y2)), None),
            C::DLine(x1, y1, x2, y2) => {
                ("dline", format!("{} {}", xy(*x1, *y1), xy(*x2, *y2)), None)
            }
            C::X(x, y) => ("x", xy(*x, *y), None),
            C::Dot(x, y) => ("dot", xy(*x, *y), None),
            C::Plus(x, y) => ("plus", xy(*x, *y), None),
            C::Box(x, y) => ("box", xy(*x, *y), None),
            C::Diamond(x, y) => ("diamond", xy(*x, *y), None),
            C::UArrow(x, y) => ("uarrow", xy(*x, *y), None),
            C::DArrow(x, y) => ("darrow", xy(*x, *y), None),
            C::LArrow(x, y) => ("larrow", xy(*x, *y), None),
            C::RArrow(x, y) => ("rarrow", xy(*x, *y), None),
            C::UTick(x, y) => ("utick", xy(*x, *y), None),
            C::DTick(x, y) => ("dtick", xy(*x, *y), None),
            C::LTick(x, y) => ("ltick", xy(*x, *y), None),
            C::RTick(x, y) => ("rtick", xy(*x, *y), None),
            C::HTick(x, y) => ("htick", xy(*x, *y), None),
            C::VTick(x, y) => ("vtick", xy(*x, *y), None),
            C::AText(x, y, t) => ("atext", xy(*x, *y), Some(t)),
            C::BText(x, y, t) => ("btext", xy(*x, *y), Some(t)),
            C::LText(x, y, t) => ("ltext", xy(*x, *y), Some(t)),
            C::RText(x, y, t) => ("rtext", xy(*x, *y), Some(t)),
            C::CText(x, y, t) => ("ctext", xy(*x, *y), Some(t)),
        };
        let _ = writeln!(out, "{word} {args}");
        if let Some(t) = text {
            let _ = writeln!(out, "{}", one_line(t));
        }
    }

    fn x(&self, v: f64) -> String {
        match (self.x_axis, self.origin) {
            (XplotAxis::Timeval, Some(origin)) => timeval(origin, v),
            (axis, _) => number(axis, v),
        }
    }

    fn y(&self, v: f64) -> String {
        number(self.y_axis, v)
    }
}

/// `origin + offset_s` as `sec.usec`, computed in integer nanoseconds so that an epoch-sized
/// time keeps its microseconds.
fn timeval((secs, nanos): (u64, u32), offset_s: f64) -> String {
    let offset_ns = if offset_s.is_finite() {
        (offset_s * 1e9).round() as i128
    } else {
        0
    };
    let total_ns = (secs as i128 * 1_000_000_000 + nanos as i128 + offset_ns).max(0);
    let total_us = (total_ns + 500) / 1000;
    format!("{}.{:06}", total_us / 1_000_000, total_us % 1_000_000)
}

fn number(axis: XplotAxis, v: f64) -> String {
    let v = if v.is_finite() { v } else { 0.0 };
    match axis {
        XplotAxis::Unsigned => format!("{:.0}", v.max(0.0).round()),
        XplotAxis::Signed => format!("{:.0}", v.round()),
        // A timeval axis without an origin is written as plain seconds with microseconds.
        XplotAxis::Double | XplotAxis::Timeval => {
            let mut s = format!("{v:.6}");
            while s.ends_with('0') {
                s.pop();
            }
            if s.ends_with('.') {
                s.pop();
            }
            if s == "-0" {
                s = "0".into();
            }
            s
        }
    }
}

/// Titles and texts occupy exactly one line in the format.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a reader of the format gets back: header words, labels, and (colour, word,
    /// numbers, text) per command. Written from the format description, independently of
    /// the writer above.
    #[derive(Debug, PartialEq)]
    struct Parsed {
        header: (String, String),
        title: String,
        xlabel: String,
        ylabel: String,
        commands: Vec<(String, String, Vec<f64>, Option<String>)>,
        ended_with_go: bool,
    }

    fn parse(text: &str) -> Result<Parsed, String> {
        const COLORS: [&str; 9] = [
            "white", "green", "red", "blue", "yellow", "purple", "orange", "magenta", "pink",
        ];
        const ONE_POINT: [&str; 17] = [
            "x",
            "dot",
            "plus",
            "box",
            "diamond",
            "uarrow",
            "darrow",
            "larrow",
            "rarrow",
            "utick",
            "dtick",
            "ltick",
            "rtick",
            "htick",
            "vtick",
            "invisible",
            "plus",
        ];
        const TEXTS: [&str; 5] = ["atext", "btext", "ltext", "rtext", "ctext"];
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().ok_or("empty")?.split_whitespace().collect();
        if header.len() != 2 {
            return Err(format!("bad header {header:?}"));
        }
        let mut p = Parsed {
            header: (header[0].into(), header[1].into()),
            title: String::new(),
            xlabel: String::new(),
            ylabel: String::new(),
            commands: Vec::new(),
            ended_with_go: false,
        };
        let mut color = "white".to_string();
        while let Some(line) = lines.next() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let Some(&word) = words.first() else { continue };
            if p.ended_with_go {
                return Err(format!("text after go: {line:?}"));
            }
            let nums = || -> Result<Vec<f64>, String> {
                words[1..]
                    .iter()
                    .map(|w| w.parse::<f64>().map_err(|e| format!("{w:?}: {e}")))
                    .collect()
            };
            match word {
                "title" => p.title = lines.next().ok_or("title without text")?.into(),
                "xlabel" => p.xlabel = lines.next().ok_or("xlabel without text")?.into(),
                "ylabel" => p.ylabel = lines.next().ok_or("ylabel without text")?.into(),
                "go" => p.ended_with_go = true,
                w if COLORS.contains(&w) && words.len() == 1 => color = w.into(),
                "line" | "dline" => {
                    let n = nums()?;
                    if n.len() != 4 {
                        return Err(format!("{line:?}"));
                    }
                    p.commands.push((color.clone(), word.into(), n, None));
                }
                w if ONE_POINT.contains(&w) || TEXTS.contains(&w) => {
                    let n = nums()?;
                    if n.len() != 2 {
                        return Err(format!("{line:?}"));
                    }
                    let t = if TEXTS.contains(&w) {
                        Some(lines.next().ok_or("text command without text")?.to_string())
                    } else {
                        None
                    };
                    p.commands.push((color.clone(), word.into(), n, t));
                }
                _ => return Err(format!("unknown command {line:?}")),
            }
        }
        Ok(p)
    }

    #[test]
    fn written_file_parses_back_to_the_same_commands_colours_and_labels() {
        let mut x = Xplot::new(XplotAxis::Double, XplotAxis::Double);
        x.title = "rtt\nsamples".into();
        x.xlabel = "time".into();
        x.ylabel = "rtt (ms)".into();
        x.push(XplotColor::Green, XplotCommand::Line(0.0, 1.5, 2.25, 3.0));
        x.push(XplotColor::Green, XplotCommand::Dot(1.0, 2.0));
        x.push(XplotColor::Red, XplotCommand::RText(1.0, 2.0, "R".into()));
        x.push(XplotColor::Purple, XplotCommand::DLine(0.5, 1.0, 0.5, 4.0));
        x.push(XplotColor::White, XplotCommand::UArrow(0.000001, 7.0));
        let p = parse(&x.to_text()).unwrap();
        assert_eq!(p.header, ("double".into(), "double".into()));
        assert_eq!(p.title, "rtt samples");
        assert_eq!(p.ylabel, "rtt (ms)");
        assert!(p.ended_with_go);
        assert_eq!(
            p.commands,
            vec![
                (
                    "green".into(),
                    "line".into(),
                    vec![0.0, 1.5, 2.25, 3.0],
                    None
                ),
                ("green".into(), "dot".into(), vec![1.0, 2.0], None),
                (
                    "red".into(),
                    "rtext".into(),
                    vec![1.0, 2.0],
                    Some("R".into())
                ),
                (
                    "purple".into(),
                    "dline".into(),
                    vec![0.5, 1.0, 0.5, 4.0],
                    None
                ),
                ("white".into(), "uarrow".into(), vec![0.000001, 7.0], None),
            ]
        );
    }

    #[test]
    fn colour_lines_are_written_only_when_the_colour_changes() {
        let mut x = Xplot::new(XplotAxis::Double, XplotAxis::Unsigned);
        for i in 0..3 {
            x.push(XplotColor::Green, XplotCommand::Dot(i as f64, 1.0));
        }
        let text = x.to_text();
        assert_eq!(text.lines().filter(|l| *l == "green").count(), 1);
    }

    #[test]
    fn timeval_axis_adds_the_origin_and_keeps_microseconds() {
        let mut x = Xplot::new(XplotAxis::Timeval, XplotAxis::Unsigned);
        x.origin = Some((1_700_000_000, 999_999_000));
        x.push(XplotColor::White, XplotCommand::Dot(0.000002, 1448.4));
        let p = parse(&x.to_text()).unwrap();
        assert_eq!(p.header, ("timeval".into(), "unsigned".into()));
        let text = x.to_text();
        assert!(text.contains("dot 1700000001.000001 1448\n"), "{text}");
    }

    #[test]
    fn time_sequence_graph_round_trips_through_the_reader() {
        let t = crate::tsg::tests::lossy_transfer();
        let x = t.xplot(Some((1_700_000_000, 0)));
        let p = parse(&x.to_text()).unwrap();
        assert_eq!(p.header, ("timeval".into(), "unsigned".into()));
        assert_eq!(p.commands.len(), x.items.len());
        // Every segment's upper arrow sits at its seq_end.
        let up: Vec<f64> = p
            .commands
            .iter()
            .filter(|c| c.1 == "uarrow")
            .map(|c| c.2[1])
            .collect();
        let want: Vec<f64> = t.segments.iter().map(|s| s.seq_end as f64).collect();
        assert_eq!(up, want);
        assert!(p
            .commands
            .iter()
            .any(|c| c.0 == "red" && c.3.as_deref() == Some("R")));
    }
}
