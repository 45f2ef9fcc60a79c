//! `mask_embedding.pt` as `torch.save({"mask_token_id": id, "embedding": tensor}, path)` writes it
//! (spec section 18.2): torch's serializer (`torch/serialization.py`, `_save`) pickles the dict at
//! protocol 2 with each storage as a persistent id, and its zip writer (`PyTorchStreamWriter`, over
//! miniz) stores each record uncompressed under `<file stem>/`, the data of each padded by an extra
//! field to 64 bytes, then a zip64 end record, its locator and the end record.
//!
//! The records, in torch's order: `data.pkl`, `.format_version` (`1`), `.storage_alignment` (`64`),
//! `byteorder` (`little`), `data/0`, then what the writer adds on closing: `version` (`3`) and
//! `.data/serialization_id`.

/// What a pickle's embedding entry holds: torch's tensor, or something else put in its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload {
    /// The faithful tensor.
    Tensor,
    /// `posix.system("touch <path>")` where the tensor would be: what a malicious file holds.
    System,
}

/// A faithful `mask_embedding.pt` of `values` (F32) and `id`.
pub fn mask_embedding_pt(id: i64, values: &[f32]) -> Vec<u8> {
    archive(
        "mask_embedding",
        &records(
            &mask_embedding_pickle(id, values.len(), Payload::Tensor, ""),
            values,
        ),
        false,
    )
}

/// The records of a torch archive of one F32 storage, in torch's order.
pub fn records(pickle: &[u8], values: &[f32]) -> Vec<(String, Vec<u8>)> {
    let storage: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    vec![
        ("data.pkl".to_owned(), pickle.to_vec()),
        (".format_version".to_owned(), b"1".to_vec()),
        (".storage_alignment".to_owned(), b"64".to_vec()),
        ("byteorder".to_owned(), b"little".to_vec()),
        ("data/0".to_owned(), storage),
        ("version".to_owned(), b"3\n".to_vec()),
        (
            ".data/serialization_id".to_owned(),
            b"1234567890123456789012345678901234567890".to_vec(),
        ),
    ]
}

/// Pickle opcodes the writer emits (Python's `pickle` module names them).
mod op {
    pub const PROTO: u8 = 0x80;
    pub const EMPTY_DICT: u8 = b'}';
    pub const BINPUT: u8 = b'q';
    pub const MARK: u8 = b'(';
    pub const BINUNICODE: u8 = b'X';
    pub const BININT1: u8 = b'K';
    pub const BININT2: u8 = b'M';
    pub const BININT: u8 = b'J';
    pub const LONG1: u8 = 0x8a;
    pub const GLOBAL: u8 = b'c';
    pub const TUPLE: u8 = b't';
    pub const TUPLE1: u8 = 0x85;
    pub const EMPTY_TUPLE: u8 = b')';
    pub const BINPERSID: u8 = b'Q';
    pub const NEWFALSE: u8 = 0x89;
    pub const REDUCE: u8 = b'R';
    pub const SETITEMS: u8 = b'u';
    pub const STOP: u8 = b'.';
}

/// Python's pickler at protocol 2, as far as a tensor dict needs it: every string, tuple, global
/// and reduced object memoized by `BINPUT` in the order pickle stores them.
struct Pickler {
    out: Vec<u8>,
    memo: u8,
}

impl Pickler {
    fn put(&mut self) {
        self.out.extend([op::BINPUT, self.memo]);
        self.memo += 1;
    }

    fn str(&mut self, s: &str) {
        self.out.push(op::BINUNICODE);
        self.out.extend((s.len() as u32).to_le_bytes());
        self.out.extend(s.as_bytes());
        self.put();
    }

    fn int(&mut self, v: i64) {
        match v {
            0..=0xff => self.out.extend([op::BININT1, v as u8]),
            0x100..=0xffff => {
                self.out.push(op::BININT2);
                self.out.extend((v as u16).to_le_bytes());
            }
            _ if i32::try_from(v).is_ok() => {
                self.out.push(op::BININT);
                self.out.extend((v as i32).to_le_bytes());
            }
            _ => {
                self.out.extend([op::LONG1, 8]);
                self.out.extend(v.to_le_bytes());
            }
        }
    }

    fn global(&mut self, module: &str, name: &str) {
        self.out.push(op::GLOBAL);
        self.out.extend(format!("{module}\n{name}\n").as_bytes());
        self.put();
    }
}

/// The pickle of `{"mask_token_id": id, "embedding": <payload>}` of a `[len]` F32 tensor in storage
/// `"0"`; `touch` is the path the `System` payload would create if the pickle were executed.
pub fn mask_embedding_pickle(id: i64, len: usize, payload: Payload, touch: &str) -> Vec<u8> {
    let mut p = Pickler {
        out: vec![op::PROTO, 2, op::EMPTY_DICT],
        memo: 0,
    };
    p.put();
    p.out.push(op::MARK);
    p.str("mask_token_id");
    p.int(id);
    p.str("embedding");
    match payload {
        Payload::Tensor => {
            p.global("torch._utils", "_rebuild_tensor_v2");
            p.out.push(op::MARK);
            // The storage's persistent id: ("storage", torch.FloatStorage, "0", "cpu", numel).
            p.out.push(op::MARK);
            p.str("storage");
            p.global("torch", "FloatStorage");
            p.str("0");
            p.str("cpu");
            p.int(len as i64);
            p.out.push(op::TUPLE);
            p.put();
            p.out.push(op::BINPERSID);
            p.int(0);
            p.int(len as i64);
            p.out.push(op::TUPLE1);
            p.put();
            p.int(1);
            p.out.push(op::TUPLE1);
            p.put();
            p.out.push(op::NEWFALSE);
            p.global("collections", "OrderedDict");
            p.out.extend([op::EMPTY_TUPLE, op::REDUCE]);
            p.put();
            p.out.push(op::TUPLE);
            p.put();
            p.out.extend([op::REDUCE]);
            p.put();
        }
        Payload::System => {
            p.global("posix", "system");
            p.str(&format!("touch {touch}"));
            p.out.push(op::TUPLE1);
            p.put();
            p.out.push(op::REDUCE);
            p.put();
        }
    }
    p.out.extend([op::SETITEMS, op::STOP]);
    p.out
}

/// A zip of `records` under `stem/`, as torch's writer lays it out; `deflated` marks every record
/// compressed (method 8) without compressing it, which is all a reader that refuses it looks at.
pub fn archive(stem: &str, records: &[(String, Vec<u8>)], deflated: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    let method: u16 = if deflated { 8 } else { 0 };
    for (name, data) in records {
        let name = format!("{stem}/{name}");
        let offset = out.len() as u32;
        let crc = dflash_gate::__private::torch_archive::crc32(data);
        // The writer pads the local header's extra field ("FB" and a length) so the data starts on
        // a multiple of 64 bytes.
        let header_end = out.len() + 30 + name.len() + 4;
        let pad = (64 - header_end % 64) % 64;
        let mut extra = Vec::from(*b"FB");
        extra.extend((pad as u16).to_le_bytes());
        extra.extend(std::iter::repeat_n(b'Z', pad));
        let fixed = |sig: u32, central: bool| {
            let mut h = Vec::new();
            h.extend(sig.to_le_bytes());
            if central {
                h.extend(20u16.to_le_bytes()); // version made by
            }
            h.extend(20u16.to_le_bytes()); // version needed
            h.extend(0u16.to_le_bytes()); // flags
            h.extend(method.to_le_bytes());
            h.extend(0u16.to_le_bytes()); // time
            h.extend(0x5821u16.to_le_bytes()); // date
            h.extend(crc.to_le_bytes());
            h.extend((data.len() as u32).to_le_bytes());
            h.extend((data.len() as u32).to_le_bytes());
            h.extend((name.len() as u16).to_le_bytes());
            h
        };
        out.extend(fixed(0x0403_4b50, false));
        out.extend((extra.len() as u16).to_le_bytes());
        out.extend(name.as_bytes());
        out.extend(&extra);
        out.extend(data);
        central.extend(fixed(0x0201_4b50, true));
        central.extend(0u16.to_le_bytes()); // extra
        central.extend(0u16.to_le_bytes()); // comment
        central.extend(0u16.to_le_bytes()); // disk
        central.extend(0u16.to_le_bytes()); // internal attributes
        central.extend(0u32.to_le_bytes()); // external attributes
        central.extend(offset.to_le_bytes());
        central.extend(name.as_bytes());
    }
    let cd_offset = out.len() as u64;
    let cd_size = central.len() as u64;
    let count = records.len() as u64;
    out.extend(central);
    let end64 = out.len() as u64;
    // The zip64 end record (56 bytes) and its locator (20), which miniz writes in zip64 mode.
    out.extend(0x0606_4b50u32.to_le_bytes());
    out.extend(44u64.to_le_bytes());
    out.extend(45u16.to_le_bytes());
    out.extend(45u16.to_le_bytes());
    out.extend(0u32.to_le_bytes());
    out.extend(0u32.to_le_bytes());
    out.extend(count.to_le_bytes());
    out.extend(count.to_le_bytes());
    out.extend(cd_size.to_le_bytes());
    out.extend(cd_offset.to_le_bytes());
    out.extend(0x0706_4b50u32.to_le_bytes());
    out.extend(0u32.to_le_bytes());
    out.extend(end64.to_le_bytes());
    out.extend(1u32.to_le_bytes());
    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out.extend((count as u16).to_le_bytes());
    out.extend((count as u16).to_le_bytes());
    out.extend((cd_size as u32).to_le_bytes());
    out.extend((cd_offset as u32).to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out
}

/// What torch.save before 1.6 writes: a bare protocol-2 pickle of its magic number first.
pub fn legacy_pt() -> Vec<u8> {
    let mut out = vec![0x80, 2, 0x8a, 0x0a];
    out.extend(
        0x1950_a86a_20f9_469c_fc6c_u128
            .to_le_bytes()
            .get(..10)
            .unwrap_or_default(),
    );
    out.push(b'.');
    out
}

pub(crate) mod tests {
    use super::*;

    unit_tests![the_fixture_is_what_the_writer_writes];

    /// `fixtures/mask_embedding.pt` (the gate's unit tests read it) is this writer's output, so the
    /// two cannot drift. `DFLASH_GATE_BLESS_TORCH=1` rewrites it.
    fn the_fixture_is_what_the_writer_writes() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mask_embedding.pt");
        let written = fixture();
        if std::env::var_os("DFLASH_GATE_BLESS_TORCH").is_some() {
            std::fs::write(&path, &written).unwrap();
        }
        let committed = std::fs::read(&path).unwrap();
        assert!(
            committed == written,
            "fixtures/mask_embedding.pt differs from the writer's output: rerun with DFLASH_GATE_BLESS_TORCH=1"
        );
    }

    /// The fixture: id 151669 (Qwen3's mask token, a four-byte BININT) and eight values.
    pub fn fixture() -> Vec<u8> {
        let values: Vec<f32> = (0..8).map(|i| i as f32 * 0.25 - 1.0).collect();
        mask_embedding_pt(151_669, &values)
    }
}
