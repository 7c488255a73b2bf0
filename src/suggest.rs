//! "Did you mean": the closest known name to a mistyped one, by edit distance.

/// Levenshtein distance over characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The candidate closest to `word`, if it is close enough to be what the user meant: one
/// edit for a short word, a third of its length (at least two) for a longer one, or a
/// candidate that starts with what they typed.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let len = word.chars().count();
    let limit = if len <= 4 { 1 } else { (len / 3).max(2) };
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let d = if word.len() >= 3 && c.starts_with(word) { 1 } else { distance(word, c) };
        if d <= limit && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_word_and_nonsense_finds_none() {
        let commands = ["check", "fix", "rules", "explain", "init", "doctor", "verify"];
        assert_eq!(closest("chek", commands), Some("check"));
        assert_eq!(closest("docter", commands), Some("doctor"));
        assert_eq!(closest("expl", commands), Some("explain"));
        assert_eq!(closest("src", commands), None);
        assert_eq!(closest("app", ["lsp", "fix"]), None);
        assert_eq!(closest("ack-timming", ["ack-timing", "response-missing"]), Some("ack-timing"));
    }
}
