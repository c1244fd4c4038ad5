//! The SVG plot of a run: pods available over time above, work-queue depth over time below.

use plotters::prelude::*;

use super::report::Report;

/// Width and height of the SVG, pixels.
const SIZE: (u32, u32) = (960, 640);

/// Renders `report`'s timeline as an SVG document.
pub fn svg(report: &Report) -> anyhow::Result<String> {
    let mut out = String::new();
    draw(report, &mut out).map_err(|e| anyhow::anyhow!("drawing the plot: {e}"))?;
    Ok(out)
}

fn draw(report: &Report, out: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let samples = &report.samples;
    let t_max = samples.iter().map(|s| s.t).fold(1.0_f64, f64::max);
    let pods_max = samples
        .iter()
        .map(|s| s.available)
        .max()
        .unwrap_or(0)
        .max(report.pods_expected)
        .max(1) as f64;
    let depth: Vec<(f64, f64)> = samples
        .iter()
        .filter_map(|s| s.queue_depth.map(|d| (s.t, d as f64)))
        .collect();
    let depth_max = depth.iter().map(|p| p.1).fold(1.0_f64, f64::max);

    let root = SVGBackend::with_string(out, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let (upper, lower) = root.split_vertically(SIZE.1 / 2);
    let c = &report.config;
    let title = format!(
        "kcm bench: {} x {} pods{}",
        c.deployments,
        c.replicas,
        c.nodes
            .map(|n| format!(" on {n} nodes"))
            .unwrap_or_default()
    );

    let mut pods = ChartBuilder::on(&upper)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..t_max, 0.0..pods_max * 1.05)?;
    pods.configure_mesh()
        .x_desc("seconds since the first create")
        .y_desc("pods available")
        .draw()?;
    pods.draw_series(LineSeries::new(
        samples.iter().map(|s| (s.t, s.available as f64)),
        BLUE.stroke_width(2),
    ))?;

    let mut queues = ChartBuilder::on(&lower)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..t_max, 0.0..depth_max * 1.05)?;
    queues
        .configure_mesh()
        .x_desc("seconds since the first create")
        .y_desc("work-queue depth (all controllers)")
        .draw()?;
    queues.draw_series(LineSeries::new(depth, RED.stroke_width(2)))?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::report::tests::sample_report;
    use super::*;

    #[test]
    fn svg_has_both_charts_and_their_lines() {
        let svg = svg(&sample_report()).expect("renders");
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
        assert!(svg.trim_end().ends_with("</svg>"));
        for want in [
            "pods available",
            "work-queue depth",
            "kcm bench: 2 x 3 pods on 2 nodes",
        ] {
            assert!(svg.contains(want), "{want:?} missing");
        }
        // The data lines, one per chart, each with one point per sample.
        for colour in ["#0000FF", "#FF0000"] {
            let line = svg
                .lines()
                .find(|l| l.contains("<polyline") && l.contains(colour))
                .unwrap_or_else(|| panic!("no {colour} line"));
            assert_eq!(line.matches(',').count(), 2, "{line}");
        }
    }
}
