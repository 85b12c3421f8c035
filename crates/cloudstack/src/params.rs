//! Ordered request parameters and CloudStack's list and map encodings (API.md §4).

/// Request parameters in insertion order. Names should be lower case (CloudStack lower-cases
/// them anyway, and lower-case names make byte order equal the server's sort order).
/// Setting a name again replaces its value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    entries: Vec<(String, String)>,
}

impl Params {
    /// An empty parameter set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `name=value`, replacing an earlier value of the same name.
    pub fn set(mut self, name: &str, value: impl ToString) -> Self {
        self.insert(name, value.to_string());
        self
    }

    /// Sets `name=value` when `value` is `Some`.
    pub fn set_opt<V: ToString>(self, name: &str, value: Option<V>) -> Self {
        match value {
            Some(value) => self.set(name, value),
            None => self,
        }
    }

    /// Sets a list parameter as one comma-joined value (`virtualmachineids=a,b`); an empty
    /// list sets nothing.
    pub fn list<S: AsRef<str>>(self, name: &str, values: &[S]) -> Self {
        if values.is_empty() {
            return self;
        }
        let joined = values
            .iter()
            .map(AsRef::as_ref)
            .collect::<Vec<_>>()
            .join(",");
        self.set(name, joined)
    }

    /// Sets a map parameter as `name[i].<key_field>=k&name[i].<value_field>=v`
    /// (e.g. `tags[0].key=…&tags[0].value=…`, `vmidipmap[0].vmid=…&vmidipmap[0].vmip=…`).
    pub fn map<K: AsRef<str>, V: AsRef<str>>(
        mut self,
        name: &str,
        key_field: &str,
        value_field: &str,
        pairs: &[(K, V)],
    ) -> Self {
        for (index, (key, value)) in pairs.iter().enumerate() {
            self.insert(
                &format!("{name}[{index}].{key_field}"),
                key.as_ref().to_owned(),
            );
            self.insert(
                &format!("{name}[{index}].{value_field}"),
                value.as_ref().to_owned(),
            );
        }
        self
    }

    /// Sets `name=value` in place, replacing an earlier value of the same name.
    pub fn insert(&mut self, name: &str, value: String) {
        match self.entries.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => entry.1 = value,
            None => self.entries.push((name.to_owned(), value)),
        }
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether `name` is set.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Removes `name`, returning its value.
    pub fn remove(&mut self, name: &str) -> Option<String> {
        let index = self.entries.iter().position(|(n, _)| n == name)?;
        Some(self.entries.remove(index).1)
    }

    /// Iterates over `(name, value)` pairs in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no parameter is set.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::Params;

    #[test]
    fn list_and_map_encoding() {
        let params = Params::new()
            .list("virtualmachineids", &["a", "b"])
            .list::<&str>("cidrlist", &[])
            .map("vmidipmap", "vmid", "vmip", &[("vm1", "10.0.0.1")])
            .set_opt("name", None::<&str>)
            .set("page", 2)
            .set("page", 3);
        let pairs: Vec<_> = params.iter().collect();
        assert_eq!(
            pairs,
            vec![
                ("virtualmachineids", "a,b"),
                ("vmidipmap[0].vmid", "vm1"),
                ("vmidipmap[0].vmip", "10.0.0.1"),
                ("page", "3"),
            ]
        );
    }
}
