import Foundation
import XCTest
import YOLOServer

/// `FormPart.parse` reads RFC 7578 forms and refuses malformed ones with `badForm`, never a crash.
final class MultipartTests: XCTestCase {
    func testFieldsAndFiles() throws {
        let body = Data("preamble\r\n--b1\r\nContent-Disposition: form-data; name=\"conf\"\r\n\r\n0.5\r\n--b1\r\n".utf8)
            + Data("Content-Disposition: form-data; name=\"file\"; filename=\"a.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n".utf8)
            + Data([0xFF, 0xD8, 0x0D, 0x0A, 0x00]) + Data("\r\n--b1--\r\n".utf8)
        let parts = try FormPart.parse(body, contentType: "multipart/form-data; boundary=\"b1\"")
        XCTAssertEqual(parts.map(\.name), ["conf", "file"])
        XCTAssertEqual(parts[0].text, "0.5")
        XCTAssertNil(parts[0].filename)
        XCTAssertEqual(parts[1].filename, "a.jpg")
        XCTAssertEqual([UInt8](parts[1].data), [0xFF, 0xD8, 0x0D, 0x0A, 0x00])
    }

    func testMalformedFormsAreErrors() {
        let cases: [(String, String)] = [
            ("--b1\r\n\r\ndata\r\n--b1--", "multipart/form-data; boundary=b1"),  // no headers
            ("--b1\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\nunterminated", "multipart/form-data; boundary=b1"),
            ("--b1", "multipart/form-data; boundary=b1"),
            ("", "multipart/form-data; boundary=b1"),
            ("--b1\r\n--b1--", "multipart/form-data"),
            ("--b1\r\nContent-Type: text/plain\r\n\r\nx\r\n--b1--", "multipart/form-data; boundary=b1"),
        ]
        for (body, contentType) in cases {
            XCTAssertThrowsError(try FormPart.parse(Data(body.utf8), contentType: contentType), body) { error in
                guard case ServerError.badForm = error else { return XCTFail("\(body): \(error)") }
            }
        }
    }
}
