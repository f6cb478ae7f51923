//! Stack frames out of a recorded backtrace, for a picture's hover text and for PyTorch's
//! snapshot format.

/// The most frames kept from one backtrace: the callers nearest the reservation.
pub const MAX_FRAMES: usize = 16;

/// One frame of a backtrace: the function and, when the backtrace resolved it, where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The function ("my_app::train::step").
    pub name: String,
    /// Its source file, or "" when unknown.
    pub filename: String,
    /// Its line in `filename`, or 0 when unknown.
    pub line: u64,
}

impl Frame {
    /// The frame as one line: "name (file:line)", or the name alone when no file is known.
    pub fn describe(&self) -> String {
        if self.filename.is_empty() {
            self.name.clone()
        } else {
            format!("{} ({}:{})", self.name, self.filename, self.line)
        }
    }
}

/// Whether a frame is the recording machinery rather than the caller: the backtrace
/// capture itself and the library's own recording and reservation path.
fn is_machinery(name: &str) -> bool {
    const PREFIXES: [&str; 4] = [
        "std::backtrace",
        "std::backtrace_rs",
        "backtrace::",
        "wgpu_memory::client::memory_history",
    ];
    PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

/// The frames of `backtrace` (the text of a `std::backtrace::Backtrace`, innermost first:
/// lines `N: function` each optionally followed by `at file:line:column`; a location
/// with no function before it is a frame named "?"), the recording
/// machinery left out, at most [`MAX_FRAMES`]. Text in another shape gives each non-empty
/// line as a frame name.
///
/// # Complexity
/// O(length of the text).
pub fn backtrace_frames(backtrace: &str) -> Vec<Frame> {
    let mut frames: Vec<Frame> = Vec::new();
    let mut numbered = false;
    for line in backtrace.lines().map(str::trim) {
        if let Some(location) = line.strip_prefix("at ") {
            let (file, line_no) = split_location(location);
            match frames.last_mut().filter(|f| f.filename.is_empty()) {
                Some(frame) => {
                    frame.filename = file;
                    frame.line = line_no;
                }
                // A location with no function before it.
                None => frames.push(Frame {
                    name: "?".to_string(),
                    filename: file,
                    line: line_no,
                }),
            }
            continue;
        }
        let name = match line.split_once(": ") {
            Some((index, name)) if index.chars().all(|c| c.is_ascii_digit()) => {
                numbered = true;
                name
            }
            _ if numbered || line.is_empty() => continue,
            _ => line,
        };
        frames.push(Frame {
            name: name.to_string(),
            filename: String::new(),
            line: 0,
        });
    }
    frames
        .into_iter()
        .filter(|frame| !is_machinery(&frame.name))
        .take(MAX_FRAMES)
        .collect()
}

/// "file:line:column" into the file and the line (0 when it does not parse).
fn split_location(location: &str) -> (String, u64) {
    let mut parts = location.rsplitn(3, ':');
    let last = parts.next().unwrap_or_default();
    let middle = parts.next();
    let rest = parts.next();
    match (rest, middle) {
        // file:line:column
        (Some(file), Some(line)) if line.parse::<u64>().is_ok() => {
            (file.to_string(), line.parse().unwrap_or(0))
        }
        // file:line
        (_, Some(file)) if last.parse::<u64>().is_ok() => {
            let file = match rest {
                Some(rest) => format!("{rest}:{file}"),
                None => file.to_string(),
            };
            (file, last.parse().unwrap_or(0))
        }
        _ => (location.to_string(), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "   0: std::backtrace_rs::backtrace::libunwind::trace
             at /rustc/abc/library/std/src/../../backtrace/src/backtrace/libunwind.rs:117:9
   1: std::backtrace::Backtrace::create
             at /rustc/abc/library/std/src/backtrace.rs:331:13
   2: wgpu_memory::client::memory_history::<impl wgpu_memory::client::Client>::reserved
             at ./src/client/memory_history.rs:212:19
   3: matmul::chain::run
             at ./examples/matmul/chain.rs:88:21
   4: main
";

    #[test]
    fn frames_skip_the_machinery_and_keep_files_and_lines() {
        let frames = backtrace_frames(TRACE);
        assert_eq!(
            frames,
            vec![
                Frame {
                    name: "matmul::chain::run".to_string(),
                    filename: "./examples/matmul/chain.rs".to_string(),
                    line: 88,
                },
                Frame {
                    name: "main".to_string(),
                    filename: String::new(),
                    line: 0,
                },
            ]
        );
        assert_eq!(
            frames[0].describe(),
            "matmul::chain::run (./examples/matmul/chain.rs:88)"
        );
    }

    #[test]
    fn other_text_gives_one_frame_per_line_and_at_most_max_frames() {
        let frames = backtrace_frames("at main.rs:1");
        assert_eq!(frames[0].describe(), "? (main.rs:1)");
        let frames = backtrace_frames("first\n\nsecond");
        assert_eq!(frames.len(), 2);
        let long: String = (0..100).map(|i| format!("{i}: f{i}\n")).collect();
        assert_eq!(backtrace_frames(&long).len(), MAX_FRAMES);
        assert_eq!(split_location("a.rs:3"), ("a.rs".to_string(), 3));
        assert_eq!(split_location("C:/a.rs:3:4"), ("C:/a.rs".to_string(), 3));
        assert_eq!(split_location("weird"), ("weird".to_string(), 0));
    }
}
