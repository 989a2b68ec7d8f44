import Foundation
import Hummingbird
import HummingbirdTesting
import TestSupport
import XCTest
import YOLOCore
import YOLOServer

/// `POST /v1/predict` and Ultralytics' `POST /predict` answer what `yolo predict` finds.
final class PredictRouteTests: XCTestCase {
    /// Every task on every shared image, as raw bodies and as forms, equals the record that
    /// `yolo predict --save-json` writes (`YOLO.predict` encoded as the command encodes it).
    func testEveryTaskEqualsPredict() async throws {
        let images = ["bus.jpg", "zidane.jpg", "boats.jpg"]
        var expected = [String: [String: String]]()
        for name in try XCTUnwrap(servedModels).names {
            let yolo = try await YOLO(try weightsFile(name).path)
            for image in images {
                let result = try await yolo.predict(try sharedFile("images/\(image)").path)
                expected[name, default: [:]][image] = try canonical(jsonData(result))
            }
        }
        try await withServer { [expected] client in
            for (model, records) in expected {
                for (image, record) in records {
                    let data = try imageData(image)
                    let raw = try await client.execute(uri: "/v1/predict?model=\(model)", method: .post,
                                                       headers: [.contentType: "image/jpeg"], body: ByteBuffer(bytes: data))
                    XCTAssertEqual(raw.status, .ok, String(buffer: raw.body))
                    XCTAssertEqual(try canonical(Data(buffer: raw.body)), record, "\(model) \(image)")
                    XCTAssertNotNil(raw.headers[.serverTiming])
                    let form = multipart(file: ("image", image, data))
                    let posted = try await client.execute(uri: "/v1/predict?model=\(model)", method: .post,
                                                          headers: [.contentType: form.contentType], body: form.body)
                    let json = try object(posted.body)
                    XCTAssertEqual(json["image"] as? String, image, "a form's file name names the record, as yolo predict's")
                    XCTAssertEqual(try canonical(Data(buffer: posted.body)), record, "\(model) \(image) as a form")
                }
            }
        }
    }

    /// Query parameters apply as `yolo predict`'s options do: conf, classes, max_det, imgsz.
    func testParametersApply() async throws {
        let yolo = try await YOLO(try weightsFile("yolo26n").path)
        yolo.configuration.confidenceThreshold = 0.5
        yolo.configuration.classes = [0]
        yolo.configuration.maxDetections = 2
        yolo.configuration.imageSize = 320
        let expected = try canonical(jsonData(try await yolo.predict(try sharedFile("images/bus.jpg").path)))
        XCTAssertEqual(((field(expected, "boxes") as? [String: Any])?["cls"] as? [Int])?.count, 2, "the limits bind")
        try await withServer { client in
            let response = try await client.execute(uri: "/v1/predict?conf=0.5&classes=0&max_det=2&imgsz=320", method: .post,
                                                    headers: [.contentType: "image/jpeg"], body: ByteBuffer(bytes: try imageData("bus.jpg")))
            XCTAssertEqual(try canonical(Data(buffer: response.body)), expected)
        }
    }

    /// `format=jpeg` answers the annotated image.
    func testAnnotatedJPEG() async throws {
        try await withServer { client in
            let response = try await client.execute(uri: "/v1/predict?format=jpeg", method: .post,
                                                    headers: [.contentType: "image/jpeg"], body: ByteBuffer(bytes: try imageData("zidane.jpg")))
            XCTAssertEqual(response.headers[.contentType], "image/jpeg")
            let image = try Image(data: Data(buffer: response.body))
            XCTAssertEqual([image.width, image.height], [1280, 720])
        }
    }

    /// Ultralytics' hosted API: a form with `file` and `conf`, answered as
    /// `{"images": [{"results": summary(), "shape", "speed"}]}` (rows as `Results.summary()`).
    func testUltralyticsAPIShape() async throws {
        let yolo = try await YOLO(try weightsFile("yolo26n-pose").path)
        yolo.configuration.confidenceThreshold = 0.4
        let result = try await yolo.predict(try sharedFile("images/bus.jpg").path)
        try await withServer { client in
            let form = multipart(file: ("file", "bus.jpg", try imageData("bus.jpg")), fields: [("model", "yolo26n-pose"), ("conf", "0.4")])
            let response = try await client.execute(uri: "/predict", method: .post, headers: [.contentType: form.contentType], body: form.body)
            XCTAssertEqual(response.status, .ok, String(buffer: response.body))
            let images = try XCTUnwrap(try object(response.body)["images"] as? [[String: Any]])
            XCTAssertEqual(images.count, 1)
            XCTAssertEqual(images[0]["shape"] as? [Int], [1080, 810])
            XCTAssertEqual(Set((images[0]["speed"] as? [String: Double] ?? [:]).keys), ["preprocess", "inference", "postprocess"])
            let rows = try XCTUnwrap(images[0]["results"] as? [[String: Any]])
            XCTAssertEqual(rows.count, result.boxes.count)
            for (row, box) in zip(rows, result.boxes) {
                XCTAssertEqual(row["class"] as? Int, box.cls)
                XCTAssertEqual(row["name"] as? String, box.name)
                XCTAssertEqual(row["confidence"] as? Double ?? 0, Double(box.conf), accuracy: 1e-5)
                let corners = try XCTUnwrap(row["box"] as? [String: Double])
                XCTAssertEqual(Set(corners.keys), ["x1", "y1", "x2", "y2"])
                for (key, value) in zip(["x1", "y1", "x2", "y2"], box.xyxy) { XCTAssertEqual(corners[key] ?? 0, Double(value), accuracy: 1e-5) }
                let keypoints = try XCTUnwrap(row["keypoints"] as? [String: [Double]])
                XCTAssertEqual(Set(keypoints.keys), ["x", "y", "visible"])
                XCTAssertEqual(keypoints["x"]?.count, 17)
            }
        }
    }

    /// `GET /v1/models` lists each model's name, task, classes and training size; the health
    /// checks answer.
    func testModelsAndHealth() async throws {
        try await withServer { client in
            let models = try await client.execute(uri: "/v1/models", method: .get)
            let list = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(buffer: models.body)) as? [[String: Any]])
            XCTAssertEqual(list.map { $0["name"] as? String }, ["yolo26n", "yolo26n-seg", "yolo26n-pose", "yolo26n-obb", "yolo26n-cls"])
            XCTAssertEqual(list.map { $0["task"] as? String }, ["detect", "segment", "pose", "obb", "classify"])
            XCTAssertEqual(list.map { $0["imgsz"] as? Int }, [640, 640, 640, 1024, 224])
            XCTAssertEqual((list[0]["names"] as? [String])?.prefix(2), ["person", "bicycle"])
            let health = try await client.execute(uri: "/healthz", method: .get)
            XCTAssertEqual(health.status, .ok)
            let ready = try await client.execute(uri: "/readyz", method: .get)
            XCTAssertEqual(ready.status, .ok)
        }
    }
}
