//! Every ggml type id, with its block size and bytes per block: the byte size of any GGUF tensor
//! follows from them, so a file of any type is read (and only the types [`super::dequantize`] knows
//! are turned into values). Ids ggml has removed (4, 5, 31 to 33, 36 to 38) are unknown.
//!
//! The sizes are ggml's (`type_traits` in `ggml.c`: `blck_size` and `sizeof(block_*)` from
//! `ggml-common.h`), since ggml's reader sizes a tensor by them. gguf-py's `GGML_QUANT_SIZES` agrees
//! on every type it has but one: it gives Q8_1 4 + 4 + 32 bytes, from when its `d` and `s` were
//! floats, where ggml's block has been two halves and 32 codes (36 bytes) since; a Q8_1 tensor that
//! ggml writes is read at ggml's size. gguf-py 0.19.0 has no Q2_0 (id 42).

use std::fmt;

macro_rules! ggml_types {
    ($($variant:ident = $id:literal, $name:literal, $block:literal, $bytes:expr;)*) => {
        /// A ggml tensor type (`enum ggml_type`).
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum GgmlType {
            $($variant,)*
        }

        impl GgmlType {
            /// Every known type, in id order.
            pub const ALL: &'static [GgmlType] = &[$(GgmlType::$variant,)*];

            pub fn from_id(id: u32) -> Option<GgmlType> {
                match id {
                    $($id => Some(GgmlType::$variant),)*
                    _ => None,
                }
            }

            pub fn id(self) -> u32 {
                match self {
                    $(GgmlType::$variant => $id,)*
                }
            }

            /// ggml's name for it (`ggml_type_name`).
            pub fn name(self) -> &'static str {
                match self {
                    $(GgmlType::$variant => $name,)*
                }
            }

            /// Elements per block (`ggml_blck_size`).
            pub fn block_size(self) -> u64 {
                match self {
                    $(GgmlType::$variant => $block,)*
                }
            }

            /// Bytes per block (`ggml_type_size`).
            pub fn type_size(self) -> u64 {
                match self {
                    $(GgmlType::$variant => $bytes,)*
                }
            }
        }
    };
}

/// Elements per super-block of the K-quants and most IQ types.
const QK_K: u64 = 256;

ggml_types! {
    F32 = 0, "f32", 1, 4;
    F16 = 1, "f16", 1, 2;
    Q4_0 = 2, "q4_0", 32, 2 + 16;
    Q4_1 = 3, "q4_1", 32, 2 + 2 + 16;
    Q5_0 = 6, "q5_0", 32, 2 + 4 + 16;
    Q5_1 = 7, "q5_1", 32, 2 + 2 + 4 + 16;
    Q8_0 = 8, "q8_0", 32, 2 + 32;
    Q8_1 = 9, "q8_1", 32, 2 + 2 + 32;
    Q2_K = 10, "q2_K", 256, 2 + 2 + QK_K / 16 + QK_K / 4;
    Q3_K = 11, "q3_K", 256, 2 + QK_K / 4 + QK_K / 8 + 12;
    Q4_K = 12, "q4_K", 256, 2 + 2 + QK_K / 2 + 12;
    Q5_K = 13, "q5_K", 256, 2 + 2 + QK_K / 2 + QK_K / 8 + 12;
    Q6_K = 14, "q6_K", 256, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16;
    Q8_K = 15, "q8_K", 256, 4 + QK_K + QK_K / 8;
    IQ2_XXS = 16, "iq2_xxs", 256, 2 + QK_K / 4;
    IQ2_XS = 17, "iq2_xs", 256, 2 + QK_K / 4 + QK_K / 32;
    IQ3_XXS = 18, "iq3_xxs", 256, 2 + QK_K / 4 + QK_K / 8;
    IQ1_S = 19, "iq1_s", 256, 2 + QK_K / 8 + QK_K / 16;
    IQ4_NL = 20, "iq4_nl", 32, 2 + 16;
    IQ3_S = 21, "iq3_s", 256, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4;
    IQ2_S = 22, "iq2_s", 256, 2 + QK_K / 4 + QK_K / 16;
    IQ4_XS = 23, "iq4_xs", 256, 2 + 2 + QK_K / 2 + QK_K / 64;
    I8 = 24, "i8", 1, 1;
    I16 = 25, "i16", 1, 2;
    I32 = 26, "i32", 1, 4;
    I64 = 27, "i64", 1, 8;
    F64 = 28, "f64", 1, 8;
    IQ1_M = 29, "iq1_m", 256, QK_K / 8 + QK_K / 16 + QK_K / 32;
    BF16 = 30, "bf16", 1, 2;
    TQ1_0 = 34, "tq1_0", 256, 2 + 4 * 13;
    TQ2_0 = 35, "tq2_0", 256, 2 + 64;
    MXFP4 = 39, "mxfp4", 32, 1 + 16;
    NVFP4 = 40, "nvfp4", 64, 4 + 32;
    Q1_0 = 41, "q1_0", 128, 2 + 16;
    Q2_0 = 42, "q2_0", 64, 2 + 16;
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
