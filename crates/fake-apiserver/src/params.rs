//! Query parameters as kube-apiserver decodes them into `metainternalversion.ListOptions`.

use std::collections::HashMap;

/// A boolean parameter (`watch`, `allowWatchBookmarks`, `sendInitialEvents`): set unless
/// missing, `0` or `false` in any case, as `Convert_Slice_string_To_bool`
/// (`staging/src/k8s.io/apimachinery/pkg/runtime/conversion.go`) reads it; an empty value
/// is true.
pub fn flag(query: &HashMap<String, String>, key: &str) -> bool {
    query
        .get(key)
        .is_some_and(|value| value != "0" && !value.eq_ignore_ascii_case("false"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anything_but_zero_or_false_is_true() {
        let query = |value: &str| HashMap::from([("watch".to_string(), value.to_string())]);
        for value in ["true", "1", "yes", "", "TRUE"] {
            assert!(flag(&query(value), "watch"), "{value:?}");
        }
        for value in ["0", "false", "False"] {
            assert!(!flag(&query(value), "watch"), "{value:?}");
        }
        assert!(!flag(&HashMap::new(), "watch"));
    }
}
