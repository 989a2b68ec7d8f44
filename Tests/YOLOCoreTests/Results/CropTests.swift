import Foundation
import TestSupport
import XCTest
import YOLOCore

final class CropTests: XCTestCase {
    /// Ultralytics 8.4.190's crops of its own yolo26n boxes on bus.jpg (`Results.save_crop`, the
    /// sizes PIL reports for the files it wrote): our crops of the same boxes have its sizes and
    /// hold the image's pixels there.
    func testCropsAreCutAsUltralyticsCutsThem() throws {
        let image = try Image(contentsOf: try sharedFile("images/bus.jpg"))
        let boxes: [([Float], Int, String)] = [
            ([223.19720458984375, 409.0158386230469, 345.49853515625, 861.2998046875], 0, "person"),
            ([48.7569465637207, 402.6962585449219, 239.46713256835938, 902.8123779296875], 0, "person"),
            ([0.0, 230.6890411376953, 801.3367309570312, 761.9708251953125], 5, "bus"),
            ([671.8545532226562, 393.8866271972656, 809.4216918945312, 878.730712890625], 0, "person"),
            ([0.0, 555.32275390625, 60.00752639770508, 871.27001953125], 0, "person"),
        ]
        let crops = Results(image: image, boxes: boxes.map { Box(xyxy: $0.0, conf: 0.5, cls: $0.1, name: $0.2, in: image) }).crops()
        // bus.jpg, bus-2.jpg, … in box order within each class folder.
        XCTAssertEqual(crops.map(\.name), ["person", "person", "bus", "person", "person"])
        XCTAssertEqual(crops.map { [$0.image.width, $0.image.height] }, [[135, 471], [205, 520], [810, 552], [145, 504], [65, 332]])
        // The first crop starts at x = trunc(284.348 − 134.747 / 2) = 216, y = trunc(635.158 − 471.33 / 2) = 399.
        let crop = crops[0].image
        for (x, y) in [(0, 0), (134, 0), (0, 470), (134, 470), (60, 200)] {
            let a = (y * crop.width + x) * 3, b = ((y + 399) * image.width + x + 216) * 3
            XCTAssertEqual(Array(crop.pixels[a..<a + 3]), Array(image.pixels[b..<b + 3]), "(\(x), \(y))")
        }
        XCTAssertEqual(Results(image: image, boxes: [Box(xyxy: [900, 1200, 950, 1300], conf: 0.5, cls: 0, name: "person", in: image)])
            .crops().count, 0, "a box wholly outside the image has no crop")
    }

    /// Rotated boxes turned upright as Ultralytics 8.4.190's `save_one_box` warps them (its own
    /// obb boxes on boats.jpg, the crops it returns and some of their pixels, RGB).
    func testRotatedCropsAreWarpedAsUltralyticsWarpsThem() throws {
        let image = try Image(contentsOf: try sharedFile("images/boats.jpg"))
        let cases: [(xywhr: [Float], size: [Int], pixels: [[UInt8]])] = [
            ([1770.3583984375, 651.79248046875, 108.44205474853516, 34.28382110595703, -0.501531720161438], [108, 34],
             [[5, 1, 2], [6, 15, 17], [166, 191, 187], [142, 160, 154], [100, 129, 122], [86, 113, 120]]),
            ([1709.1533203125, 787.615966796875, 107.97049713134766, 33.98624801635742, -0.44958388805389404], [108, 34],
             [[0, 0, 0], [61, 78, 80], [160, 175, 179], [170, 161, 156], [20, 27, 33], [166, 176, 178]]),
            ([1486.462158203125, 314.7645263671875, 97.79027557373047, 31.663103103637695, -0.5179659724235535], [98, 32],
             [[0, 1, 4], [158, 180, 181], [12, 32, 32], [120, 131, 132], [167, 179, 176], [142, 163, 164]]),
        ]
        let boxes = cases.map { OrientedBox(xywhr: $0.xywhr, conf: 0.5, cls: 1, name: "ship", in: image) }
        let crops = Results(task: .obb, originalShape: [image.height, image.width], inputShape: [], obb: boxes, image: image).crops()
        XCTAssertEqual(crops.map(\.name), ["ship", "ship", "ship"])
        for (crop, expected) in zip(crops.map(\.image), cases) {
            let (w, h) = (crop.width, crop.height)
            XCTAssertEqual([w, h], expected.size)
            // Ultralytics' points: the corners, the centre and (w/3, 2h/3); OpenCV's rounding is
            // followed to within 1 (see rotatedCrop).
            for ((x, y), rgb) in zip([(0, 0), (w - 1, 0), (0, h - 1), (w - 1, h - 1), (w / 2, h / 2), (w / 3, 2 * h / 3)], expected.pixels) {
                let i = (y * w + x) * 3
                XCTAssertLessThanOrEqual(zip(crop.pixels[i..<i + 3], rgb).map { abs(Int($0) - Int($1)) }.max()!, 1,
                                         "(\(x), \(y)) of \(expected.xywhr): \(Array(crop.pixels[i..<i + 3])) against \(rgb)")
            }
        }
    }
}
