import Foundation

/// Ultralytics' validation plots drawn with our raster code: the precision–recall curve and the
/// confusion matrix.
extension ValidationResults {
    /// Precision against recall at IoU 0.5: a line per class (coloured with a legend when there
    /// are fewer than 21, grey otherwise) and the mean over classes, thick and blue.
    public func precisionRecallPlot() -> Image {
        let (width, height) = (800, 600)
        let (left, top, right, bottom) = (60, 40, 770, 550)
        var canvas = Image(width: width, height: height, rgb: [UInt8](repeating: 255, count: width * height * 3))
        func point(_ x: Double, _ y: Double) -> SIMD2<Float> {
            SIMD2(Float(Double(left) + x * Double(right - left)), Float(Double(bottom) - y * Double(bottom - top)))
        }
        func curve(_ precision: [Double], thickness: Int, color: RGB) {
            for i in 1..<precision.count {
                canvas.drawLine(point(recallAxis[i - 1], precision[i - 1]), point(recallAxis[i], precision[i]),
                                thickness: thickness, color: color)
            }
        }
        canvas.drawText("Precision-Recall Curve", x: left, y: 10, scale: 2, color: RGB(0x000000))
        for tick in 0...5 {
            let v = Double(tick) / 5, p = point(v, v), label = String(format: "%.1f", v)
            canvas.fillRectangle(x0: Int(p.x), y0: bottom, x1: Int(p.x) + 1, y1: bottom + 5, color: RGB(0x000000))
            canvas.drawText(label, x: Int(p.x) - 8, y: bottom + 8, scale: 1, color: RGB(0x000000))
            canvas.fillRectangle(x0: left - 5, y0: Int(p.y), x1: left, y1: Int(p.y) + 1, color: RGB(0x000000))
            canvas.drawText(label, x: left - 30, y: Int(p.y) - 4, scale: 1, color: RGB(0x000000))
        }
        canvas.drawText("Recall", x: (left + right) / 2 - 18, y: bottom + 25, scale: 1, color: RGB(0x000000))
        canvas.drawText("Precision", x: 4, y: top - 14, scale: 1, color: RGB(0x000000))
        let legend = classes.count < 21
        for (i, c) in classes.enumerated() where i < precisionAtRecall.count {
            let color = legend ? classColor(c.cls) : RGB(0x808080)
            curve(precisionAtRecall[i], thickness: 1, color: color)
            if legend {
                let y = top + 10 + 14 * i
                canvas.fillRectangle(x0: right - 190, y0: y + 3, x1: right - 175, y1: y + 5, color: color)
                canvas.drawText("\(c.name) \(String(format: "%.3f", c.mAP50))", x: right - 170, y: y, scale: 1, color: RGB(0x000000))
            }
        }
        if !precisionAtRecall.isEmpty {
            let mean = recallAxis.indices.map { i in precisionAtRecall.reduce(0) { $0 + $1[i] } / Double(precisionAtRecall.count) }
            curve(mean, thickness: 3, color: RGB(0x1F77B4))
            let y = top + 10 + 14 * (legend ? classes.count : 0)
            canvas.fillRectangle(x0: right - 190, y0: y + 2, x1: right - 175, y1: y + 6, color: RGB(0x1F77B4))
            canvas.drawText("all classes \(String(format: "%.3f", mAP50)) mAP@0.5", x: right - 170, y: y, scale: 1,
                            color: RGB(0x000000))
        }
        canvas.strokeRectangle(x0: left, y0: top, x1: right, y1: bottom, thickness: 1, color: RGB(0x000000))
        return canvas
    }

    /// The confusion matrix, rows predicted and columns true with background last; `normalized`
    /// divides each column by its sum. Cells under 0.005 stay blank; values are written in the
    /// cells when there are fewer than 30 classes.
    public func confusionMatrixPlot(normalized: Bool = true) -> Image {
        let n = confusionMatrix.count
        let labels = names + ["background"]
        let cell = max(10, min(48, 800 / max(n, 1)))
        let longest = labels.map(\.count).max() ?? 0
        let left = longest * BitmapFont.advance + 20, top = 40
        let bottom = top + n * cell + 10 + longest * (BitmapFont.glyphHeight + 1) + 30
        let width = left + n * cell + 20, height = bottom
        var canvas = Image(width: width, height: height, rgb: [UInt8](repeating: 255, count: width * height * 3))
        let sums = (0..<n).map { j in confusionMatrix.reduce(0) { $0 + $1[j] } }
        let values = confusionMatrix.map { row in
            row.enumerated().map { j, v in normalized ? Double(v) / (Double(sums[j]) + 1e-9) : Double(v) }
        }
        let largest = normalized ? 1 : max(values.flatMap { $0 }.max() ?? 1, 1)
        canvas.drawText("Confusion Matrix" + (normalized ? " Normalized" : ""), x: left, y: 10, scale: 2, color: RGB(0x000000))
        for i in 0..<n {
            for j in 0..<n where values[i][j] >= 0.005 {
                // Matplotlib's "Blues" from its lightest to its darkest.
                let t = min(values[i][j] / largest, 1)
                func channel(_ low: Double, _ high: Double) -> UInt32 { UInt32((low + (high - low) * t).rounded()) }
                let color = RGB(channel(247, 8) << 16 | channel(251, 48) << 8 | channel(255, 107))
                let x = left + j * cell, y = top + i * cell
                canvas.fillRectangle(x0: x, y0: y, x1: x + cell, y1: y + cell, color: color)
                if n < 30 {
                    let text = normalized ? String(format: "%.2f", values[i][j]) : "\(confusionMatrix[i][j])"
                    let size = Image.textSize(text, scale: 1)
                    canvas.drawText(text, x: x + (cell - size.width) / 2, y: y + (cell - size.height) / 2, scale: 1,
                                    color: t > 0.45 ? RGB(0xFFFFFF) : RGB(0x000000))
                }
            }
        }
        for (k, label) in labels.enumerated() {
            let y = top + k * cell + (cell - BitmapFont.glyphHeight) / 2
            canvas.drawText(label, x: left - 8 - Image.textSize(label, scale: 1).width, y: y, scale: 1, color: RGB(0x000000))
            // Column names read downwards, a letter a line.
            for (m, character) in label.enumerated() {
                canvas.drawText(String(character), x: left + k * cell + (cell - BitmapFont.glyphWidth) / 2,
                                y: top + n * cell + 10 + m * (BitmapFont.glyphHeight + 1), scale: 1, color: RGB(0x000000))
            }
        }
        canvas.drawText("Predicted", x: 4, y: top - 14, scale: 1, color: RGB(0x000000))
        canvas.drawText("True", x: left + n * cell / 2 - 12, y: bottom - 20, scale: 1, color: RGB(0x000000))
        canvas.strokeRectangle(x0: left, y0: top, x1: left + n * cell, y1: top + n * cell, thickness: 1, color: RGB(0xC0C0C0))
        return canvas
    }
}
