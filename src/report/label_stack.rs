//! Nested allocation labels: "outer/inner".

/// The labels in force, innermost last; [`current`](Self::current) joins them with `/`.
///
/// A scope guard pushes a name when it is made and, when dropped, truncates the stack back
/// to the depth [`push`](Self::push) returned, so a guard dropped out of order still leaves
/// the stack as its own scope found it.
///
/// ```
/// use wgpu_memory::report::LabelStack;
/// let mut labels = LabelStack::default();
/// let outer = labels.push("model");
/// labels.push("layer 3");
/// assert_eq!(labels.current(), Some("model/layer 3"));
/// labels.truncate(outer);
/// assert_eq!(labels.current(), None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelStack {
    /// Full paths, one per depth: `paths[i]` is the label at depth `i + 1`.
    paths: Vec<String>,
}

impl LabelStack {
    /// The separator between nested names.
    pub const SEPARATOR: char = '/';

    /// Enters a scope named `name`; returns the depth before it, for [`truncate`](Self::truncate).
    pub fn push(&mut self, name: &str) -> usize {
        let depth = self.paths.len();
        let path = match self.paths.last() {
            Some(parent) => format!("{parent}{}{name}", Self::SEPARATOR),
            None => name.to_string(),
        };
        self.paths.push(path);
        depth
    }

    /// Leaves the innermost scope; returns its full label, or `None` when no scope is open.
    pub fn pop(&mut self) -> Option<String> {
        self.paths.pop()
    }

    /// Leaves every scope deeper than `depth` (no effect when the stack is not deeper).
    pub fn truncate(&mut self, depth: usize) {
        self.paths.truncate(depth);
    }

    /// The number of open scopes.
    pub fn depth(&self) -> usize {
        self.paths.len()
    }

    /// The label in force ("outer/inner"), or `None` outside every scope.
    pub fn current(&self) -> Option<&str> {
        self.paths.last().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_nest_as_outer_slash_inner() {
        let mut labels = LabelStack::default();
        assert_eq!(labels.current(), None);
        labels.push("outer");
        assert_eq!(labels.current(), Some("outer"));
        labels.push("inner");
        assert_eq!(labels.current(), Some("outer/inner"));
        assert_eq!(labels.pop().as_deref(), Some("outer/inner"));
        assert_eq!(labels.current(), Some("outer"));
        labels.push("other");
        assert_eq!(labels.current(), Some("outer/other"));
        assert_eq!(labels.depth(), 2);
    }

    #[test]
    fn truncating_to_a_guard_depth_closes_inner_scopes_too() {
        let mut labels = LabelStack::default();
        labels.push("a");
        let b = labels.push("b");
        labels.push("c");
        labels.truncate(b);
        assert_eq!(labels.current(), Some("a"));
        labels.truncate(5);
        assert_eq!(labels.current(), Some("a"));
        assert_eq!(labels.pop().as_deref(), Some("a"));
        assert_eq!(labels.pop(), None);
    }
}
