//! The one font every chart uses, embedded in the binary so that PNGs have readable text on a
//! machine with no fonts installed. SVGs name the generic family `sans-serif` and let the
//! viewer pick its own; the embedded font is only used to measure and rasterise text.
//!
//! DejaVu Sans is under the Bitstream Vera licence (fonts/LICENSE-DejaVu.txt), which allows
//! redistribution inside software.

use plotters::style::FontStyle;
use std::sync::Once;

/// The family name charts ask for; registered below for plotters' `ab_glyph` rasteriser.
pub(crate) const FAMILY: &str = "sans-serif";

pub(crate) static DEJAVU_SANS: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");

/// Registers the embedded font once per process. plotters keeps registered fonts in a
/// process-wide table; registering again would be harmless but wasteful.
pub(crate) fn ensure_registered() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are compiled in and known good; if they were not, every text draw would
        // fail with plotters' "font unavailable" error, which callers see as ReportError::Draw.
        let _ = plotters::style::register_font(FAMILY, FontStyle::Normal, DEJAVU_SANS);
    });
}
