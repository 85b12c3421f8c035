//! Just enough of the protobuf wire format to read the few requests kubectl sends as
//! Kubernetes protobuf (`Content-Type: application/vnd.kubernetes.protobuf`): the
//! `k8s\0` magic, then a `runtime.Unknown` whose `raw` (field 2) is the object
//! (`staging/src/k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go`).
//! Answers are always JSON, which kubectl also accepts.

/// One protobuf field: a varint or a length-delimited value (64- and 32-bit values are
/// skipped).
#[derive(Debug, Clone, PartialEq)]
pub enum Field<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 2: a string, bytes or an embedded message.
    Bytes(&'a [u8]),
}

fn varint(buf: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// The fields of a message as `(number, value)`, in wire order; `None` when it does not
/// parse.
pub fn fields(buf: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let mut fields = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let key = varint(buf, &mut at)?;
        let field = match key & 7 {
            0 => Field::Varint(varint(buf, &mut at)?),
            2 => {
                let len = usize::try_from(varint(buf, &mut at)?).ok()?;
                let bytes = buf.get(at..at.checked_add(len)?)?;
                at += len;
                Field::Bytes(bytes)
            }
            1 => {
                at += 8;
                continue;
            }
            5 => {
                at += 4;
                continue;
            }
            _ => return None,
        };
        fields.push((key >> 3, field));
    }
    Some(fields)
}

/// The first length-delimited field `number` of the message `buf` (`Some(None)` when it
/// is absent, as a nil pointer in Go; `None` when `buf` does not parse).
pub fn message(buf: &[u8], number: u64) -> Option<Option<&[u8]>> {
    Some(fields(buf)?.into_iter().find_map(|(n, f)| match f {
        Field::Bytes(bytes) if n == number => Some(bytes),
        _ => None,
    }))
}

/// The string field `number` of the message `buf` (`""` when absent, Go's zero value).
pub fn string(buf: &[u8], number: u64) -> Option<String> {
    Some(
        message(buf, number)?
            .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
            .unwrap_or_default(),
    )
}

/// The object inside a Kubernetes protobuf body: `runtime.Unknown.raw` after the `k8s\0`
/// magic; `None` for any other body (JSON).
pub fn unknown_raw(body: &[u8]) -> Option<&[u8]> {
    message(body.strip_prefix(b"k8s\0")?, 2)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_strings_and_embedded_messages_are_read() {
        // { 1: "ab", 2: { 1: "c" }, 3: 300 }
        let buf = [
            &[0x0a, 2][..],
            b"ab",
            &[0x12, 3, 0x0a, 1],
            b"c",
            &[0x18, 0xac, 0x02],
        ]
        .concat();
        assert_eq!(string(&buf, 1), Some("ab".into()));
        assert_eq!(string(&buf, 4), Some(String::new()));
        let inner = message(&buf, 2).unwrap().unwrap();
        assert_eq!(string(inner, 1), Some("c".into()));
        assert_eq!(fields(&buf).unwrap()[2], (3, Field::Varint(300)));
        assert_eq!(message(&[0x0a, 5], 1), None, "truncated");
        assert_eq!(unknown_raw(b"{}"), None);
    }
}
