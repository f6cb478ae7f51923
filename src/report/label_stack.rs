//! Nested allocation labels: "outer/inner".

/// The label scopes open, in the order they were opened; [`current`](Self::current) joins
/// their names with `/`.
///
/// Each scope is closed by the id [`push`](Self::push) returned, and closing one removes
/// only that scope: scopes opened after it stay open and are joined under what remains. So
/// guards dropped out of order (or by different threads sharing one stack) never close a
/// scope whose guard still lives.
///
/// ```
/// use wgpu_memory::report::LabelStack;
/// let mut labels = LabelStack::default();
/// let model = labels.push("model");
/// let layer = labels.push("layer 3");
/// assert_eq!(labels.current(), Some("model/layer 3"));
/// labels.close(model);
/// assert_eq!(labels.current(), Some("layer 3"));
/// labels.close(layer);
/// assert_eq!(labels.current(), None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelStack {
    /// The open scopes, oldest first.
    scopes: Vec<Scope>,
    /// The id the next scope gets.
    next_id: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Scope {
    id: u64,
    name: String,
    /// The names of this scope and every scope before it, joined.
    path: String,
}

impl LabelStack {
    /// The separator between nested names.
    pub const SEPARATOR: char = '/';

    /// Opens a scope named `name` inside the open ones; returns its id, for
    /// [`close`](Self::close).
    pub fn push(&mut self, name: &str) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let path = self.joined(self.scopes.len(), name);
        self.scopes.push(Scope {
            id,
            name: name.to_string(),
            path,
        });
        id
    }

    /// Closes the scope `id`, leaving every other open scope open; returns whether it was
    /// open.
    ///
    /// # Complexity
    /// O(open scopes) (labels of later scopes are joined again).
    pub fn close(&mut self, id: u64) -> bool {
        let Some(at) = self.scopes.iter().position(|scope| scope.id == id) else {
            return false;
        };
        self.scopes.remove(at);
        for index in at..self.scopes.len() {
            let name = std::mem::take(&mut self.scopes[index].name);
            self.scopes[index].path = self.joined(index, &name);
            self.scopes[index].name = name;
        }
        true
    }

    /// `name` joined under the scopes before `index`.
    fn joined(&self, index: usize, name: &str) -> String {
        match index.checked_sub(1).map(|parent| &self.scopes[parent].path) {
            Some(parent) => format!("{parent}{}{name}", Self::SEPARATOR),
            None => name.to_string(),
        }
    }

    /// The number of open scopes.
    pub fn depth(&self) -> usize {
        self.scopes.len()
    }

    /// The label in force ("outer/inner"), or `None` outside every scope.
    pub fn current(&self) -> Option<&str> {
        self.scopes.last().map(|scope| scope.path.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_nest_as_outer_slash_inner() {
        let mut labels = LabelStack::default();
        assert_eq!(labels.current(), None);
        let outer = labels.push("outer");
        assert_eq!(labels.current(), Some("outer"));
        let inner = labels.push("inner");
        assert_eq!(labels.current(), Some("outer/inner"));
        assert!(labels.close(inner));
        assert_eq!(labels.current(), Some("outer"));
        labels.push("other");
        assert_eq!(labels.current(), Some("outer/other"));
        assert_eq!(labels.depth(), 2);
        assert!(labels.close(outer));
        assert!(!labels.close(outer), "closed once");
        assert_eq!(labels.current(), Some("other"));
    }

    #[test]
    fn a_stale_scope_closing_never_closes_a_newer_one() {
        // a, b open; a closes; c, d open; b closes: c and d stay open.
        let mut labels = LabelStack::default();
        let a = labels.push("a");
        let b = labels.push("b");
        labels.close(a);
        labels.push("c");
        labels.push("d");
        assert_eq!(labels.current(), Some("b/c/d"));
        labels.close(b);
        assert_eq!(labels.current(), Some("c/d"));
        assert_eq!(labels.depth(), 2);
    }
}
