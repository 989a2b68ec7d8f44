import Foundation

/// One part of a `multipart/form-data` body (RFC 7578): a form field or a file.
package struct FormPart: Sendable {
    package let name: String
    package let filename: String?
    package let data: Data

    /// The part's bytes as text (a form field's value).
    package var text: String { String(decoding: data, as: UTF8.self) }

    /// The parts of `body`, delimited by the boundary of `contentType`; a body that does not
    /// follow the format is `ServerError.badForm`.
    package static func parse(_ body: Data, contentType: String) throws -> [FormPart] {
        guard let boundary = boundary(of: contentType) else {
            throw ServerError.badForm(reason: "the content type gives no boundary")
        }
        let delimiter = Data("--\(boundary)".utf8), separator = Data("\r\n\r\n".utf8)
        guard var start = body.range(of: delimiter)?.upperBound else {
            throw ServerError.badForm(reason: "the boundary '\(boundary)' does not occur in the body")
        }
        var parts = [FormPart]()
        // Each part follows a delimiter and CRLF, and ends at CRLF and the next delimiter; "--"
        // after a delimiter closes the body.
        while !body[start...].starts(with: Data("--".utf8)) {
            guard body[start...].starts(with: Data("\r\n".utf8)),
                  let next = body.range(of: Data("\r\n".utf8) + delimiter, in: start..<body.endIndex),
                  let headerEnd = body.range(of: separator, in: start..<next.lowerBound) else {
                throw ServerError.badForm(reason: "a part is not terminated by the boundary")
            }
            // From the CRLF after the delimiter: a part without headers is CRLF CRLF.
            let headers = String(decoding: body[start..<headerEnd.lowerBound], as: UTF8.self)
            guard let disposition = headers.split(separator: "\r\n").first(where: { $0.lowercased().hasPrefix("content-disposition:") }),
                  let name = parameter("name", in: disposition) else {
                throw ServerError.badForm(reason: "a part has no Content-Disposition name")
            }
            parts.append(FormPart(name: name, filename: parameter("filename", in: disposition),
                                  data: Data(body[headerEnd.upperBound..<next.lowerBound])))
            start = next.upperBound
        }
        return parts
    }

    /// `boundary=…` of a multipart content type, quoted or not (RFC 2046: 1 to 70 characters).
    private static func boundary(of contentType: String) -> String? {
        guard let value = parameter("boundary", in: Substring(contentType)), (1...70).contains(value.count) else { return nil }
        return value
    }

    /// The value of `key=value` or `key="value"` among a header's `;`-separated parameters.
    private static func parameter(_ key: String, in header: Substring) -> String? {
        for field in header.split(separator: ";").dropFirst() {
            let pair = field.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2, pair[0].lowercased() == key else { continue }
            let value = pair[1]
            return value.count >= 2 && value.hasPrefix("\"") && value.hasSuffix("\"") ? String(value.dropFirst().dropLast()) : value
        }
        return nil
    }
}
