//! The two-bit ECN field of the IP header (RFC 3168 §5, RFC 8311 for ECT(1) as the L4S
//! identifier, RFC 9331).

use std::fmt;

/// An ECN codepoint. The numeric values are the field's bits.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Ecn {
    /// 00: the transport does not do ECN.
    NotEct = 0b00,
    /// 01: ECN-capable; under RFC 9331 the L4S identifier.
    Ect1 = 0b01,
    /// 10: ECN-capable, classic (RFC 3168).
    Ect0 = 0b10,
    /// 11: congestion experienced.
    Ce = 0b11,
}

impl Ecn {
    /// The codepoint in the low two bits of `bits`.
    pub const fn from_bits(bits: u8) -> Ecn {
        match bits & 0b11 {
            0b00 => Ecn::NotEct,
            0b01 => Ecn::Ect1,
            0b10 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }
    pub const fn bits(self) -> u8 {
        self as u8
    }
    /// ECT(0), ECT(1) or CE: a packet an AQM may mark instead of dropping.
    pub const fn is_ect(self) -> bool {
        !matches!(self, Ecn::NotEct)
    }
    /// The short names used in logs and summaries.
    pub const fn name(self) -> &'static str {
        match self {
            Ecn::NotEct => "not-ect",
            Ecn::Ect1 => "ect1",
            Ecn::Ect0 => "ect0",
            Ecn::Ce => "ce",
        }
    }
}

impl fmt::Display for Ecn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
