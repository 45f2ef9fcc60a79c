//! A pickle reader that executes nothing: the opcodes and globals of a torch tensor dict, and no more.
//!
//! Python's unpickler calls whatever a pickle names (`GLOBAL os system` then `REDUCE` runs a shell).
//! This reader knows protocols 2 to 5 and only the opcodes `torch.save` of a dict of tensors and
//! integers emits; every global is checked against an exact allow-list the moment it is read
//! (`collections.OrderedDict`, `torch._utils._rebuild_tensor_v2`, the storage types), and anything
//! else is refused there, named, before a byte more is read. `REDUCE` is interpreted, never called:
//! an empty `OrderedDict()` (a tensor's backward hooks) and `_rebuild_tensor_v2(...)` become typed
//! values; a persistent id (`BINPERSID`) becomes a storage reference the archive resolves. The
//! stack, the memo, the nesting and every string and tuple are bounded by [`crate::limits`]; a value
//! fetched from the memo is shared, never copied, so a pickle cannot grow in memory by reference.

use crate::limits::{
    MAX_PICKLE_DEPTH, MAX_PICKLE_ITEMS, MAX_PICKLE_MEMO, MAX_PICKLE_STACK, MAX_PICKLE_STRING_BYTES,
};
use std::collections::BTreeMap;
use std::rc::Rc;

/// A torch storage type the allow-list admits: the element type of a tensor's storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageType {
    Float,
    Double,
    Half,
    BFloat16,
    Long,
    Int,
    Short,
    Char,
    Byte,
    Bool,
}

impl StorageType {
    const ALL: [StorageType; 10] = [
        StorageType::Float,
        StorageType::Double,
        StorageType::Half,
        StorageType::BFloat16,
        StorageType::Long,
        StorageType::Int,
        StorageType::Short,
        StorageType::Char,
        StorageType::Byte,
        StorageType::Bool,
    ];

    /// torch's name without `Storage` (`torch.FloatStorage`).
    pub fn torch_name(self) -> &'static str {
        match self {
            StorageType::Float => "Float",
            StorageType::Double => "Double",
            StorageType::Half => "Half",
            StorageType::BFloat16 => "BFloat16",
            StorageType::Long => "Long",
            StorageType::Int => "Int",
            StorageType::Short => "Short",
            StorageType::Char => "Char",
            StorageType::Byte => "Byte",
            StorageType::Bool => "Bool",
        }
    }

    /// The safetensors name of the element type.
    pub fn name(self) -> &'static str {
        match self {
            StorageType::Float => "F32",
            StorageType::Double => "F64",
            StorageType::Half => "F16",
            StorageType::BFloat16 => "BF16",
            StorageType::Long => "I64",
            StorageType::Int => "I32",
            StorageType::Short => "I16",
            StorageType::Char => "I8",
            StorageType::Byte => "U8",
            StorageType::Bool => "BOOL",
        }
    }

    pub fn element_bytes(self) -> u64 {
        match self {
            StorageType::Double | StorageType::Long => 8,
            StorageType::Float | StorageType::Int => 4,
            StorageType::Half | StorageType::BFloat16 | StorageType::Short => 2,
            StorageType::Char | StorageType::Byte | StorageType::Bool => 1,
        }
    }
}

/// A global the allow-list admits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Global {
    OrderedDict,
    RebuildTensorV2,
    Storage(StorageType),
}

/// The one global allowed for `module.name`, or `None`: matched exactly, never by prefix.
fn allowed(module: &str, name: &str) -> Option<Global> {
    match (module, name) {
        ("collections", "OrderedDict") => Some(Global::OrderedDict),
        ("torch._utils", "_rebuild_tensor_v2") => Some(Global::RebuildTensorV2),
        ("torch", storage) => StorageType::ALL
            .into_iter()
            .find(|t| storage.strip_suffix("Storage") == Some(t.torch_name()))
            .map(Global::Storage),
        _ => None,
    }
}

/// A tensor as `_rebuild_tensor_v2` would build it, described, not built.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub dtype: StorageType,
    /// The archive's `data/<key>`.
    pub storage_key: String,
    /// Elements the storage holds, as its persistent id states.
    pub storage_numel: u64,
    pub offset: u64,
    pub shape: Vec<u64>,
    pub stride: Vec<u64>,
}

/// A value of the pickle. Containers share their elements (`Rc`): the memo hands out references.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// Each container carries how deep it nests (a container of scalars is 1), computed once when
    /// it is built, so no walk of shared values is ever needed to bound it.
    Tuple(Vec<Rc<Value>>, usize),
    List(Vec<Rc<Value>>, usize),
    Dict(Vec<(Rc<Value>, Rc<Value>)>, usize),
    Global(Global),
    /// The storage a persistent id names: type, key, element count.
    Storage(StorageType, String, u64),
    Tensor(Tensor),
}

impl Value {
    /// What the value is, for a message (never its contents).
    pub fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "a bool",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Str(_) => "a string",
            Value::Tuple(..) => "a tuple",
            Value::List(..) => "a list",
            Value::Dict(..) => "a dict",
            Value::Global(_) => "a global",
            Value::Storage(..) => "a storage",
            Value::Tensor(_) => "a tensor",
        }
    }
}

/// Why a pickle was refused: a lowercase sentence naming the opcode, the global or the bound, and
/// the byte offset where it was met.
pub type Refusal = String;

/// An item of the stack: a value, or a mark (`(`) that a later `TUPLE`, `SETITEMS` or `APPENDS`
/// collects the values above.
#[derive(Clone)]
enum Item {
    Mark,
    Value(Rc<Value>),
}

/// The name of an opcode the reader refuses, for its message: the ones that run or build objects
/// are named as Python's `pickletools` names them.
fn refused_name(op: u8) -> Option<&'static str> {
    Some(match op {
        b'R' => "REDUCE",
        b'b' => "BUILD",
        b'i' => "INST",
        b'o' => "OBJ",
        0x81 => "NEWOBJ",
        0x92 => "NEWOBJ_EX",
        b'c' => "GLOBAL",
        0x93 => "STACK_GLOBAL",
        b'P' => "PERSID",
        b'0' => "POP",
        b'1' => "POP_MARK",
        b'2' => "DUP",
        b'F' => "FLOAT",
        b'I' => "INT",
        b'L' => "LONG",
        0x8b => "LONG4",
        b'S' => "STRING",
        b'T' => "BINSTRING",
        b'U' => "SHORT_BINSTRING",
        b'V' => "UNICODE",
        0x8d => "BINUNICODE8",
        b'B' => "BINBYTES",
        b'C' => "SHORT_BINBYTES",
        0x8e => "BINBYTES8",
        0x96 => "BYTEARRAY8",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        b'l' => "LIST",
        b'd' => "DICT",
        0x8f => "EMPTY_SET",
        0x90 => "ADDITEMS",
        0x91 => "FROZENSET",
        b'p' => "PUT",
        b'g' => "GET",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        _ => return None,
    })
}

/// Reads a pickle to its `STOP`: the one value it leaves. Bytes after `STOP` are refused.
pub fn read(bytes: &[u8]) -> Result<Rc<Value>, Refusal> {
    let mut r = Reader {
        bytes,
        at: 0,
        stack: Vec::new(),
        marks: 0,
        memo: BTreeMap::new(),
    };
    r.run()
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    stack: Vec<Item>,
    marks: usize,
    memo: BTreeMap<u32, Rc<Value>>,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], Refusal> {
        let at = self.at;
        let got = self
            .bytes
            .get(at..)
            .and_then(|b| b.get(..n))
            .ok_or_else(|| format!("the pickle ends inside an opcode's argument at byte {at}"))?;
        self.at += n;
        Ok(got)
    }

    fn u8(&mut self) -> Result<u8, Refusal> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, Refusal> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, Refusal> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A length-prefixed UTF-8 string, its length checked before anything is taken.
    fn string(&mut self, len: usize, op: &str) -> Result<String, Refusal> {
        if len > MAX_PICKLE_STRING_BYTES {
            return Err(format!(
                "{op} at byte {} declares a string of {len} bytes, over the {MAX_PICKLE_STRING_BYTES} read",
                self.at
            ));
        }
        let at = self.at;
        let b = self.take(len)?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| format!("{op} at byte {at} is not UTF-8"))
    }

    /// A newline-ended line of `GLOBAL`'s argument, bounded as a string is.
    fn line(&mut self) -> Result<String, Refusal> {
        let rest = self.bytes.get(self.at..).unwrap_or_default();
        let window = rest.get(..MAX_PICKLE_STRING_BYTES + 1).unwrap_or(rest);
        let Some(end) = window.iter().position(|&b| b == b'\n') else {
            return Err(format!(
                "GLOBAL at byte {} has no line of at most {MAX_PICKLE_STRING_BYTES} bytes",
                self.at
            ));
        };
        self.string(end, "GLOBAL")
            .and_then(|s| self.take(1).map(|_| s))
    }

    fn push(&mut self, v: Value) -> Result<(), Refusal> {
        self.push_rc(Rc::new(v))
    }

    fn push_rc(&mut self, v: Rc<Value>) -> Result<(), Refusal> {
        if self.stack.len() >= MAX_PICKLE_STACK {
            return Err(format!(
                "the pickle's stack grows past {MAX_PICKLE_STACK} at byte {}",
                self.at
            ));
        }
        self.stack.push(Item::Value(v));
        Ok(())
    }

    fn pop(&mut self, op: &str) -> Result<Rc<Value>, Refusal> {
        match self.stack.pop() {
            Some(Item::Value(v)) => Ok(v),
            Some(Item::Mark) => Err(format!("{op} at byte {} meets a mark", self.at)),
            None => Err(format!("{op} at byte {} meets an empty stack", self.at)),
        }
    }

    fn top(&mut self, op: &str) -> Result<Rc<Value>, Refusal> {
        match self.stack.last() {
            Some(Item::Value(v)) => Ok(v.clone()),
            _ => Err(format!("{op} at byte {} has no value to take", self.at)),
        }
    }

    /// The values above the newest mark, the mark removed.
    fn pop_mark(&mut self, op: &str) -> Result<Vec<Rc<Value>>, Refusal> {
        let Some(mark) = self.stack.iter().rposition(|i| matches!(i, Item::Mark)) else {
            return Err(format!("{op} at byte {} has no mark", self.at));
        };
        let items: Vec<Rc<Value>> = self
            .stack
            .drain(mark..)
            .filter_map(|i| match i {
                Item::Value(v) => Some(v),
                Item::Mark => None,
            })
            .collect();
        self.marks -= 1;
        Ok(items)
    }

    fn items(&self, op: &str, n: usize) -> Result<(), Refusal> {
        if n > MAX_PICKLE_ITEMS {
            return Err(format!(
                "{op} at byte {} collects {n} items, over the {MAX_PICKLE_ITEMS} read",
                self.at
            ));
        }
        Ok(())
    }

    /// Values of the dict on top of the stack, extended by `pairs`.
    fn set_items(&mut self, op: &str, pairs: Vec<Rc<Value>>) -> Result<(), Refusal> {
        if !pairs.len().is_multiple_of(2) {
            return Err(format!(
                "{op} at byte {} has a key without a value",
                self.at
            ));
        }
        let dict = self.pop(op)?;
        let Value::Dict(items, _) = &*dict else {
            return Err(format!(
                "{op} at byte {} sets items on {}, not a dict",
                self.at,
                dict.kind()
            ));
        };
        let mut items = items.clone();
        self.items(op, items.len() + pairs.len() / 2)?;
        let mut pairs = pairs.into_iter();
        while let (Some(k), Some(v)) = (pairs.next(), pairs.next()) {
            if !matches!(*k, Value::Str(_) | Value::Int(_)) {
                return Err(format!(
                    "{op} at byte {} keys a dict by {}",
                    self.at,
                    k.kind()
                ));
            }
            if items.iter().any(|(old, _)| *old == k) {
                return Err(format!("{op} at byte {} sets a key twice", self.at));
            }
            items.push((k, v));
        }
        let d = nested(items.iter().map(|(_, v)| v), op, self.at)?;
        self.push(Value::Dict(items, d))
    }

    fn memo_put(&mut self, key: u32, op: &str) -> Result<(), Refusal> {
        let v = self.top(op)?;
        if key as usize >= MAX_PICKLE_MEMO {
            return Err(format!(
                "{op} at byte {} stores memo key {key}, over the {MAX_PICKLE_MEMO} kept",
                self.at
            ));
        }
        self.memo.insert(key, v);
        Ok(())
    }

    fn memo_get(&mut self, key: u32, op: &str) -> Result<(), Refusal> {
        let v = self.memo.get(&key).cloned().ok_or_else(|| {
            format!(
                "{op} at byte {} fetches memo key {key}, never stored",
                self.at
            )
        })?;
        self.push_rc(v)
    }

    fn global(&mut self, module: &str, name: &str, op: &str, at: usize) -> Result<(), Refusal> {
        match allowed(module, name) {
            Some(g) => self.push(Value::Global(g)),
            None => Err(format!(
                "{op} at byte {at} names the global {}.{}, which is not a torch tensor's: refused unread",
                crate::escape::escape(module),
                crate::escape::escape(name)
            )),
        }
    }

    fn tuple(&mut self, items: Vec<Rc<Value>>, op: &str) -> Result<(), Refusal> {
        self.items(op, items.len())?;
        let d = nested(items.iter(), op, self.at)?;
        self.push(Value::Tuple(items, d))
    }

    fn run(&mut self) -> Result<Rc<Value>, Refusal> {
        loop {
            let at = self.at;
            let op = self
                .bytes
                .get(at)
                .copied()
                .ok_or_else(|| format!("the pickle ends at byte {at} without STOP"))?;
            self.at += 1;
            match op {
                0x80 => {
                    let proto = self.u8()?;
                    if !(2..=5).contains(&proto) {
                        return Err(format!(
                            "PROTO at byte {at} is protocol {proto}: protocols 2 to 5 are read"
                        ));
                    }
                }
                // A frame only says how many bytes follow: its length is checked against them.
                0x95 => {
                    let b = self.take(8)?;
                    let len = u64::from_le_bytes(b.try_into().unwrap_or_default());
                    if len > (self.bytes.len() - self.at) as u64 {
                        return Err(format!(
                            "FRAME at byte {at} declares {len} bytes, more than the pickle holds"
                        ));
                    }
                }
                b'.' => {
                    let v = self.pop("STOP")?;
                    if !self.stack.is_empty() {
                        return Err(format!("STOP at byte {at} leaves values on the stack"));
                    }
                    if self.at != self.bytes.len() {
                        return Err(format!(
                            "{} bytes follow STOP at byte {at}",
                            self.bytes.len() - self.at
                        ));
                    }
                    return Ok(v);
                }
                b'(' => {
                    if self.marks >= MAX_PICKLE_DEPTH {
                        return Err(format!(
                            "MARK at byte {at} opens more than {MAX_PICKLE_DEPTH} marks"
                        ));
                    }
                    if self.stack.len() >= MAX_PICKLE_STACK {
                        return Err(format!(
                            "the pickle's stack grows past {MAX_PICKLE_STACK} at byte {at}"
                        ));
                    }
                    self.marks += 1;
                    self.stack.push(Item::Mark);
                }
                b'}' => self.push(Value::Dict(Vec::new(), 1))?,
                b']' => self.push(Value::List(Vec::new(), 1))?,
                b')' => self.push(Value::Tuple(Vec::new(), 1))?,
                b'N' => self.push(Value::None)?,
                0x88 => self.push(Value::Bool(true))?,
                0x89 => self.push(Value::Bool(false))?,
                b'K' => {
                    let v = self.u8()?;
                    self.push(Value::Int(v.into()))?
                }
                b'M' => {
                    let v = self.u16()?;
                    self.push(Value::Int(v.into()))?
                }
                b'J' => {
                    let v = self.u32()? as i32;
                    self.push(Value::Int(v.into()))?
                }
                0x8a => {
                    let n = usize::from(self.u8()?);
                    if n > 8 {
                        return Err(format!(
                            "LONG1 at byte {at} is {n} bytes long: integers over 64 bits are not read"
                        ));
                    }
                    let b = self.take(n)?;
                    let mut v: i64 = 0;
                    for (i, &byte) in b.iter().enumerate() {
                        v |= i64::from(byte) << (8 * i);
                    }
                    // Two's complement, little-endian, sign-extended from its last byte.
                    if (1..8).contains(&n) && b[n - 1] & 0x80 != 0 {
                        v |= -1i64 << (8 * n);
                    }
                    self.push(Value::Int(v))?
                }
                b'G' => {
                    let b = self.take(8)?;
                    let v = f64::from_be_bytes(b.try_into().unwrap_or_default());
                    self.push(Value::Float(v))?
                }
                b'X' => {
                    let n = self.u32()? as usize;
                    let s = self.string(n, "BINUNICODE")?;
                    self.push(Value::Str(s))?
                }
                0x8c => {
                    let n = usize::from(self.u8()?);
                    let s = self.string(n, "SHORT_BINUNICODE")?;
                    self.push(Value::Str(s))?
                }
                b'q' => {
                    let k = self.u8()?;
                    self.memo_put(k.into(), "BINPUT")?
                }
                b'r' => {
                    let k = self.u32()?;
                    self.memo_put(k, "LONG_BINPUT")?
                }
                0x94 => {
                    let k = u32::try_from(self.memo.len()).unwrap_or(u32::MAX);
                    self.memo_put(k, "MEMOIZE")?
                }
                b'h' => {
                    let k = self.u8()?;
                    self.memo_get(k.into(), "BINGET")?
                }
                b'j' => {
                    let k = self.u32()?;
                    self.memo_get(k, "LONG_BINGET")?
                }
                b't' => {
                    let items = self.pop_mark("TUPLE")?;
                    self.tuple(items, "TUPLE")?
                }
                0x85..=0x87 => {
                    let n = usize::from(op - 0x84);
                    let name = ["TUPLE1", "TUPLE2", "TUPLE3"][n - 1];
                    let mut items = Vec::with_capacity(n);
                    for _ in 0..n {
                        items.push(self.pop(name)?);
                    }
                    items.reverse();
                    self.tuple(items, name)?
                }
                b's' => {
                    let v = self.pop("SETITEM")?;
                    let k = self.pop("SETITEM")?;
                    self.set_items("SETITEM", vec![k, v])?
                }
                b'u' => {
                    let pairs = self.pop_mark("SETITEMS")?;
                    self.set_items("SETITEMS", pairs)?
                }
                b'a' | b'e' => {
                    let (name, new) = if op == b'a' {
                        ("APPEND", vec![self.pop("APPEND")?])
                    } else {
                        ("APPENDS", self.pop_mark("APPENDS")?)
                    };
                    let list = self.pop(name)?;
                    let Value::List(items, _) = &*list else {
                        return Err(format!("{name} at byte {at} appends to {}", list.kind()));
                    };
                    let mut items = items.clone();
                    items.extend(new);
                    self.items(name, items.len())?;
                    let d = nested(items.iter(), name, at)?;
                    self.push(Value::List(items, d))?
                }
                b'c' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    self.global(&module, &name, "GLOBAL", at)?
                }
                0x93 => {
                    let name = self.pop("STACK_GLOBAL")?;
                    let module = self.pop("STACK_GLOBAL")?;
                    let (Value::Str(m), Value::Str(n)) = (&*module, &*name) else {
                        return Err(format!(
                            "STACK_GLOBAL at byte {at} names a global by something not a string"
                        ));
                    };
                    self.global(m, n, "STACK_GLOBAL", at)?
                }
                b'Q' => {
                    let id = self.pop("BINPERSID")?;
                    let storage =
                        storage(&id).map_err(|e| format!("BINPERSID at byte {at}: {e}"))?;
                    self.push(storage)?
                }
                b'R' => {
                    let args = self.pop("REDUCE")?;
                    let callable = self.pop("REDUCE")?;
                    let v = reduce(&callable, &args)
                        .map_err(|e| format!("REDUCE at byte {at}: {e}"))?;
                    self.push(v)?
                }
                other => {
                    return Err(match refused_name(other) {
                        Some(name) => format!(
                        "opcode {name} at byte {at} is not one a torch tensor dict needs: refused"
                    ),
                        None => format!("unknown opcode 0x{other:02x} at byte {at}: refused"),
                    })
                }
            }
        }
    }
}

/// How deep `v` nests (a scalar is 0), as stored when it was built.
fn depth(v: &Value) -> usize {
    match v {
        Value::Tuple(_, d) | Value::List(_, d) | Value::Dict(_, d) => *d,
        _ => 0,
    }
}

/// The depth of a container of `items`, refused past [`MAX_PICKLE_DEPTH`].
fn nested<'v>(
    items: impl Iterator<Item = &'v Rc<Value>>,
    op: &str,
    at: usize,
) -> Result<usize, Refusal> {
    let d = 1 + items.map(|v| depth(v)).max().unwrap_or(0);
    if d > MAX_PICKLE_DEPTH {
        return Err(format!(
            "{op} at byte {at} nests {d} deep, over the {MAX_PICKLE_DEPTH} read"
        ));
    }
    Ok(d)
}

/// torch's persistent id of a storage: `("storage", torch.XStorage, key, location, numel)`.
fn storage(id: &Value) -> Result<Value, Refusal> {
    let Value::Tuple(t, _) = id else {
        return Err(format!("the persistent id is {}, not a tuple", id.kind()));
    };
    let parts: Vec<&Value> = t.iter().map(|v| &**v).collect();
    match parts.as_slice() {
        [Value::Str(tag), Value::Global(Global::Storage(ty)), Value::Str(key), Value::Str(_), Value::Int(n)]
            if tag == "storage" =>
        {
            if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(format!(
                    "the storage key {} is not a name inside the archive",
                    crate::escape::escape(key)
                ));
            }
            let n = u64::try_from(*n).map_err(|_| "a storage of negative size".to_owned())?;
            Ok(Value::Storage(*ty, key.clone(), n))
        }
        _ => Err(
            "the persistent id is not torch's (\"storage\", a storage type, key, location, size)"
                .to_owned(),
        ),
    }
}

/// What `REDUCE` of an allowed callable means, without calling it.
fn reduce(callable: &Value, args: &Value) -> Result<Value, Refusal> {
    let Value::Tuple(args, _) = args else {
        return Err(format!("the arguments are {}, not a tuple", args.kind()));
    };
    match callable {
        // A tensor's backward hooks: torch.save writes `OrderedDict()` and refuses to save others.
        Value::Global(Global::OrderedDict) if args.is_empty() => Ok(Value::Dict(Vec::new(), 1)),
        Value::Global(Global::OrderedDict) => Err(
            "collections.OrderedDict is called with arguments: only OrderedDict() is read"
                .to_owned(),
        ),
        Value::Global(Global::RebuildTensorV2) => rebuild_tensor(args),
        Value::Global(Global::Storage(t)) => Err(format!(
            "torch.{}Storage is called: a storage is only named by a persistent id",
            t.torch_name()
        )),
        other => Err(format!(
            "the callable is {}, not an allowed global",
            other.kind()
        )),
    }
}

/// `_rebuild_tensor_v2(storage, offset, size, stride, requires_grad, backward_hooks[, metadata])`.
fn rebuild_tensor(args: &[Rc<Value>]) -> Result<Value, Refusal> {
    let dims = |v: &Value, what: &str| -> Result<Vec<u64>, Refusal> {
        let Value::Tuple(items, _) = v else {
            return Err(format!("the tensor's {what} is {}, not a tuple", v.kind()));
        };
        if items.len() > crate::limits::MAX_RANK {
            return Err(format!(
                "the tensor's {what} has {} dimensions, over {}",
                items.len(),
                crate::limits::MAX_RANK
            ));
        }
        items
            .iter()
            .map(|d| match **d {
                Value::Int(n) => u64::try_from(n).map_err(|_| format!("a negative {what}")),
                _ => Err(format!("the tensor's {what} holds {}", d.kind())),
            })
            .collect()
    };
    let parts: Vec<&Value> = args.iter().map(|v| &**v).collect();
    let (storage, offset, size, stride, hooks) = match parts.as_slice() {
        [s, o, size, stride, Value::Bool(_), hooks] => (s, o, size, stride, hooks),
        [s, o, size, stride, Value::Bool(_), hooks, Value::Dict(meta, _)] if meta.is_empty() => {
            (s, o, size, stride, hooks)
        }
        _ => {
            return Err("torch._utils._rebuild_tensor_v2's arguments are not (storage, offset, size, stride, requires_grad, hooks)".to_owned())
        }
    };
    let Value::Storage(dtype, key, numel) = storage else {
        return Err(format!("the tensor's storage is {}", storage.kind()));
    };
    let Value::Int(offset) = offset else {
        return Err(format!("the tensor's offset is {}", offset.kind()));
    };
    if !matches!(hooks, Value::Dict(h, _) if h.is_empty()) {
        return Err("the tensor has backward hooks".to_owned());
    }
    let shape = dims(size, "size")?;
    let stride = dims(stride, "stride")?;
    if shape.len() != stride.len() {
        return Err("the tensor's size and stride differ in rank".to_owned());
    }
    Ok(Value::Tensor(Tensor {
        dtype: *dtype,
        storage_key: key.clone(),
        storage_numel: *numel,
        offset: u64::try_from(*offset).map_err(|_| "a negative offset".to_owned())?,
        shape,
        stride,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(bytes: &[u8], says: &str) {
        match read(bytes) {
            Ok(v) => panic!("read {v:?} where {says:?} was owed"),
            Err(e) => assert!(e.contains(says), "{e:?} does not say {says:?}"),
        }
    }

    #[test]
    fn reads_a_dict_of_an_integer() {
        let v = read(b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01K\x05u.").unwrap();
        let Value::Dict(items, 1) = &*v else {
            panic!("{v:?}")
        };
        assert_eq!(*items[0].0, Value::Str("a".to_owned()));
        assert_eq!(*items[0].1, Value::Int(5));
    }

    #[test]
    fn reads_negative_and_long_integers() {
        let v = read(b"\x80\x02\x8a\x02\x00\xff\x8a\x01\x05J\xff\xff\xff\xff\x87.").unwrap();
        let Value::Tuple(t, _) = &*v else { panic!() };
        let ints: Vec<&Value> = t.iter().map(|v| &**v).collect();
        assert_eq!(ints, [&Value::Int(-256), &Value::Int(5), &Value::Int(-1)]);
    }

    #[test]
    fn refuses_os_system_by_global() {
        refused(
            b"\x80\x02cos\nsystem\nq\x00X\x05\x00\x00\x00touchq\x01\x85R.",
            "the global os.system",
        );
    }

    #[test]
    fn refuses_posix_system_before_reading_its_arguments() {
        // The argument is never reached: the refusal is at the global's byte.
        refused(b"\x80\x02cposix\nsystem\n\xff\xff", "posix.system");
    }

    #[test]
    fn refuses_builtins_eval_by_stack_global() {
        refused(
            b"\x80\x04\x8c\x08builtins\x8c\x04eval\x93.",
            "STACK_GLOBAL at byte 18 names the global builtins.eval",
        );
    }

    #[test]
    fn refuses_a_near_miss_of_an_allowed_global() {
        refused(b"\x80\x02ctorch\nStorage\n.", "torch.Storage");
        refused(
            b"\x80\x02ctorch._utils\n_rebuild_parameter\n.",
            "_rebuild_parameter",
        );
        refused(b"\x80\x02ccollections \nOrderedDict\n.", "the global");
    }

    #[test]
    fn refuses_build() {
        refused(b"\x80\x02}}b.", "opcode BUILD at byte 4");
    }

    #[test]
    fn refuses_an_unknown_opcode() {
        refused(b"\x80\x02\xff.", "unknown opcode 0xff at byte 2");
    }

    #[test]
    fn refuses_protocols_outside_two_to_five() {
        refused(b"\x80\x01N.", "protocol 1");
        refused(b"\x80\x06N.", "protocol 6");
    }

    #[test]
    fn refuses_a_long_string_before_taking_it() {
        refused(
            b"\x80\x02X\xff\xff\xff\x7f",
            "2147483647 bytes, over the 256",
        );
    }

    #[test]
    fn refuses_a_string_that_is_not_utf8() {
        refused(b"\x80\x02X\x01\x00\x00\x00\xff.", "not UTF-8");
    }

    #[test]
    fn refuses_a_memo_key_past_the_limit() {
        refused(b"\x80\x02Nr\x00\x04\x00\x00.", "memo key 1024");
    }

    #[test]
    fn refuses_a_memo_key_never_stored() {
        refused(b"\x80\x02h\x07.", "memo key 7, never stored");
    }

    #[test]
    fn refuses_nesting_past_the_limit() {
        let mut p = b"\x80\x02)".to_vec();
        p.extend(std::iter::repeat_n(0x85, MAX_PICKLE_DEPTH));
        p.push(b'.');
        refused(&p, "nests 17 deep");
    }

    #[test]
    fn refuses_a_stack_past_the_limit() {
        let mut p = b"\x80\x02".to_vec();
        p.extend(std::iter::repeat_n(b'N', MAX_PICKLE_STACK + 1));
        refused(&p, "stack grows past 256");
    }

    #[test]
    fn refuses_marks_past_the_limit() {
        let mut p = b"\x80\x02".to_vec();
        p.extend(std::iter::repeat_n(b'(', MAX_PICKLE_DEPTH + 1));
        refused(&p, "more than 16 marks");
    }

    #[test]
    fn refuses_a_tuple_past_the_item_limit() {
        let mut p = b"\x80\x02(".to_vec();
        p.extend(std::iter::repeat_n(b'N', MAX_PICKLE_ITEMS + 1));
        p.extend(b"t.");
        refused(&p, "collects 65 items");
    }

    #[test]
    fn refuses_bytes_after_stop() {
        refused(b"\x80\x02N.N", "1 bytes follow STOP");
    }

    #[test]
    fn refuses_a_pickle_without_stop() {
        refused(b"\x80\x02N", "without STOP");
    }

    #[test]
    fn refuses_a_long_over_64_bits() {
        refused(
            b"\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.",
            "over 64 bits",
        );
    }

    #[test]
    fn refuses_a_frame_longer_than_the_pickle() {
        refused(b"\x80\x04\x95\xff\x00\x00\x00\x00\x00\x00\x00N.", "FRAME");
    }

    #[test]
    fn refuses_calling_a_storage_type() {
        refused(
            b"\x80\x02ctorch\nFloatStorage\n)R.",
            "torch.FloatStorage is called",
        );
    }

    #[test]
    fn refuses_an_ordered_dict_called_with_arguments() {
        refused(
            b"\x80\x02ccollections\nOrderedDict\n]\x85R.",
            "with arguments",
        );
    }

    #[test]
    fn refuses_a_persistent_id_that_is_not_torchs() {
        refused(b"\x80\x02X\x01\x00\x00\x00aQ.", "not a tuple");
    }

    #[test]
    fn refuses_a_storage_key_that_leaves_the_archive() {
        refused(
            b"\x80\x02(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x02\x00\x00\x00..X\x03\x00\x00\x00cpuK\x01tQ.",
            "not a name inside the archive",
        );
    }

    #[test]
    fn refuses_a_duplicate_key() {
        refused(b"\x80\x02}(K\x01NK\x01Nu.", "sets a key twice");
    }

    #[test]
    fn refuses_setitems_on_a_list() {
        refused(b"\x80\x02](K\x01Nu.", "not a dict");
    }

    #[test]
    fn refuses_a_mark_where_a_value_is_owed() {
        refused(b"\x80\x02(\x85.", "meets a mark");
    }
}
