//! The input's active data segments as one.
//!
//! Go's linker writes a module's data as up to 100,000 active segments — the most a module may
//! have — and a snapshot keeps each of the input's segments (as an empty passive one) beside its
//! own, which would pass the limit. Active segments of memory 0 at constant offsets are applied in
//! order at instantiation onto zeroed memory, so one segment from the first byte to the last, the
//! gaps zero and later segments written over earlier ones, initialises the same memory.

use wasm_encoder::{ConstExpr, DataSection, Module, RawSection};
use wasmparser::{DataKind, Operator, Parser, Payload};

use crate::Error;

/// `wasm` with its data section as one active segment (unchanged without a data section).
pub(crate) fn merge_active(wasm: &[u8]) -> Result<Vec<u8>, Error> {
    let mut out = Module::new();
    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload?;
        if let Payload::DataSection(reader) = &payload {
            out.section(&merged(reader.clone())?);
        } else if let Payload::DataCountSection { count, .. } = &payload {
            // Passive segments are refused below, so no instruction refers to a segment.
            let _ = count;
            out.section(&wasm_encoder::DataCountSection { count: 1 });
        } else if let Some((id, range)) = payload.as_section() {
            out.section(&RawSection {
                id,
                data: &wasm[range],
            });
        }
    }
    Ok(out.finish())
}

fn merged(reader: wasmparser::DataSectionReader<'_>) -> Result<DataSection, Error> {
    let mut segments = Vec::new();
    for (index, data) in (0u32..).zip(reader) {
        let data = data?;
        let why = |why: &str| Error::Segment {
            index,
            why: why.to_string(),
        };
        let DataKind::Active {
            memory_index: 0,
            offset_expr,
        } = data.kind
        else {
            return Err(why("only active segments of memory 0 are merged"));
        };
        let mut ops = offset_expr.get_operators_reader();
        let offset = match ops.read()? {
            // An i32 offset is an unsigned address.
            #[allow(clippy::cast_sign_loss, reason = "a memory32 address")]
            Operator::I32Const { value } => value as u32 as usize,
            _ => return Err(why("the offset is not a constant")),
        };
        segments.push((offset, data.data));
    }
    let start = segments
        .iter()
        .map(|(offset, _)| *offset)
        .min()
        .unwrap_or(0);
    let end = segments
        .iter()
        .map(|(offset, data)| offset + data.len())
        .max()
        .unwrap_or(0);
    let mut bytes = vec![0u8; end - start];
    for (offset, data) in &segments {
        bytes[offset - start..offset - start + data.len()].copy_from_slice(data);
    }
    let mut section = DataSection::new();
    #[allow(
        clippy::cast_possible_wrap,
        clippy::cast_possible_truncation,
        reason = "a memory32 address, read from an i32"
    )]
    section.active(0, &ConstExpr::i32_const(start as u32 as i32), bytes);
    Ok(section)
}
