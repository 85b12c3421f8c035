//! The crate's one reader of DER (X.509 certificates): the few fields it needs, the
//! certificate's validity and key (`cloud/loadbalancer/certificates.rs`) and a client
//! certificate's subject (`server/client_cert.rs`), are read item by item with it.

/// One DER item of `input`: (tag, contents, the rest); `None` when it is cut short or its
/// length takes more than four bytes.
pub(crate) fn item(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7F);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let len = rest[..count]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[count..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

#[cfg(test)]
mod tests {
    use super::item;

    #[test]
    fn short_and_long_lengths_and_cut_input() {
        assert_eq!(
            item(&[0x02, 0x01, 0x05, 0xff]),
            Some((0x02, &[0x05][..], &[0xff][..]))
        );
        let mut long = vec![0x04, 0x81, 0x80];
        long.extend([7u8; 0x80]);
        assert_eq!(
            item(&long).map(|(t, c, r)| (t, c.len(), r.len())),
            Some((0x04, 0x80, 0))
        );
        assert_eq!(item(&[0x30, 0x05, 0x01]), None);
        assert_eq!(item(&[0x30, 0x85, 0, 0, 0, 0, 1]), None);
        assert_eq!(item(&[0x30]), None);
    }
}
