//! A drawing backend that passes everything to an inner bitmap backend except text, which it
//! rasterises itself from the embedded font.
//!
//! Why: plotters' own `ab_glyph` text path places each glyph at the pen position without the
//! glyph's left side bearing, so letters crowd or gap ("S YN", "E CE") in PNGs. Here each
//! glyph is drawn at pen position plus its outline's own bounds, with kerning, anti-aliased
//! coverage, the four right-angle rotations and the anchor the caller asked for. The same
//! metrics serve text-size estimates, so layout and drawing agree. Vector output (SVG) does
//! not go through here: browsers lay out SVG text themselves.

use crate::font::DEJAVU_SANS;
use ab_glyph::{point, Font, FontRef, PxScale, ScaleFont};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
};

/// Wraps `B`, drawing text with the embedded font.
pub(crate) struct TextFix<B> {
    inner: B,
    font: FontRef<'static>,
}

impl<B: DrawingBackend> TextFix<B> {
    /// `None` only if the compiled-in font failed to parse, which a test rules out.
    pub(crate) fn new(inner: B) -> Option<TextFix<B>> {
        let font = FontRef::try_from_slice(DEJAVU_SANS).ok()?;
        Some(TextFix { inner, font })
    }

    /// Width and height of `text` at `size` (plotters' size: the font's full height in px).
    fn measure(&self, text: &str, size: f64) -> (f32, f32) {
        let f = self.font.as_scaled(PxScale::from(size as f32));
        let mut width = 0.0;
        let mut prev = None;
        for c in text.chars() {
            let id = f.glyph_id(c);
            if let Some(p) = prev {
                width += f.kern(p, id);
            }
            width += f.h_advance(id);
            prev = Some(id);
        }
        (width, f.ascent() - f.descent())
    }
}

impl<B: DrawingBackend> DrawingBackend for TextFix<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.blit_bitmap(pos, size, src)
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<B::ErrorType>> {
        let (w, h) = self.measure(text, style.size());
        Ok((w.ceil() as u32, h.ceil() as u32))
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let scale = PxScale::from(style.size() as f32);
        let (width, height) = self.measure(text, style.size());
        let anchor = style.anchor();
        let dx = match anchor.h_pos {
            HPos::Left => 0.0,
            HPos::Center => -width / 2.0,
            HPos::Right => -width,
        };
        let dy = match anchor.v_pos {
            VPos::Top => 0.0,
            VPos::Center => -height / 2.0,
            VPos::Bottom => -height,
        };
        let transform = style.transform();
        let font = self.font.clone();
        let f = font.as_scaled(scale);
        // Pixels are collected first: the outline callback cannot return errors.
        let mut pixels: Vec<(i32, i32, f32)> = Vec::new();
        let mut caret = 0.0f32;
        let mut prev = None;
        for c in text.chars() {
            let id = f.glyph_id(c);
            if let Some(p) = prev {
                caret += f.kern(p, id);
            }
            prev = Some(id);
            let glyph = id.with_scale_and_position(scale, point(caret + dx, f.ascent() + dy));
            caret += f.h_advance(id);
            if let Some(outline) = f.outline_glyph(glyph) {
                let b = outline.px_bounds();
                outline.draw(|gx, gy, coverage| {
                    if coverage > 0.0 {
                        pixels.push((
                            b.min.x as i32 + gx as i32,
                            b.min.y as i32 + gy as i32,
                            coverage.min(1.0),
                        ));
                    }
                });
            }
        }
        for (x, y, coverage) in pixels {
            let (tx, ty) = transform.transform(x, y);
            self.inner.draw_pixel(
                (pos.0 + tx, pos.1 + ty),
                BackendColor {
                    alpha: color.alpha * coverage as f64,
                    rgb: color.rgb,
                },
            )?;
        }
        Ok(())
    }
}
