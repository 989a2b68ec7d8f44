/// A 5×9 bitmap font for printable ASCII (32…126), drawn for this project (no third-party glyphs).
/// Rows 0–6 stand on the baseline (capitals fill all 7), rows 7–8 hold descenders.
enum BitmapFont {
    static let glyphWidth = 5
    static let glyphHeight = 9
    static let capHeight = 7
    /// Distance between the origins of consecutive glyphs: one blank column between letters.
    static let advance = 6

    /// Whether the pixel at `row`, `column` of `character`'s glyph is ink; characters outside
    /// printable ASCII draw as '?'.
    static func ink(_ character: Character, row: Int, column: Int) -> Bool {
        let code = Int(character.asciiValue ?? 0)
        let glyph = glyphs[(32...126).contains(code) ? code - 32 : Int(UInt8(ascii: "?")) - 32]
        return glyph >> UInt64(row * glyphWidth + column) & 1 == 1
    }

    /// One glyph per character from ' ' (32) to '~' (126): bit 5·row + column, row 0 at the top,
    /// column 0 at the left.
    private static let glyphs: [UInt64] = [
        0x000000000000, 0x000100421084, 0x00000000014A, 0x000295F57D4A, 0x00011F4717C4, 0x000632222263,
        0x000593511526, 0x000000000884, 0x000208210888, 0x000088842082, 0x000009575480, 0x0000084F9080,
        0x00110C000000, 0x0000000F8000, 0x00018C000000, 0x000002222200, 0x0003A33AE62E, 0x0003884210C4,
        0x0007C444422E, 0x0003A304111F, 0x000211F4A988, 0x0003A3083C3F, 0x0003A317844C, 0x00008422221F,
        0x0003A317462E, 0x0001910F462E, 0x00000C6018C0, 0x0000886018C0, 0x000208208888, 0x000001F07C00,
        0x000088882082, 0x00010044422E, 0x0003AB5B422E, 0x0004631FC62E, 0x0003E317C62F, 0x0003A210862E,
        0x0001D318C527, 0x0007C217843F, 0x00004217843F, 0x0007A31E862E, 0x0004631FC631, 0x00038842108E,
        0x00019284211C, 0x000452519531, 0x0007C2108421, 0x0004631AD771, 0x0004639ACE31, 0x0003A318C62E,
        0x00004217C62F, 0x00059358C62E, 0x00045257C62F, 0x0003E107043E, 0x00010842109F, 0x0003A318C631,
        0x00011518C631, 0x0002AB5AC631, 0x000462A22A31, 0x000108454631, 0x0007C222221F, 0x00038421084E,
        0x000020820820, 0x00039084210E, 0x000000004544, 0x00F800000000, 0x000000002082, 0x0007A3E83800,
        0x0003E319B421, 0x0003A210B800, 0x0007A31CDA10, 0x000383F8B800, 0x000084238A4C, 0x0E87A318F800,
        0x00046319B421, 0x000388421804, 0x064A10843008, 0x00024A32A421, 0x000388421086, 0x00056B5AAC00,
        0x00046319B400, 0x0003A318B800, 0x010BE318BC00, 0x1087A318F800, 0x00004219B400, 0x0003E0E0F800,
        0x000324211C42, 0x0005B318C400, 0x00011518C400, 0x0002AB58C400, 0x000454454400, 0x0E87A318C400,
        0x0007C4447C00, 0x000208411088, 0x000108421084, 0x000088441082, 0x0000008A8800
    ]
}
