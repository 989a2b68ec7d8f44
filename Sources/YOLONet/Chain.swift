import Tensor

/// A block of a `Chain`: reads the last piece, writes the next.
protocol ChainBlock: Sendable {
    /// Its `state_dict` prefix, the name its output is observed by.
    var name: String { get }
    /// Output channels.
    var channels: Int { get }
    var convs: [Conv] { get }
    /// The block on x into y (same plane); returns `y` with its range as its last convolution
    /// measured it (`Conv.callAsFunction`).
    func callAsFunction(_ x: Map, into y: Map, _ ws: Workspace) -> Map
}

/// The aggregation of C2f-style modules (C2fCIB, A2C2f, RepNCSPELAN4, ELAN1):
/// last(cat(cv1(x), b₁(·), b₂(·), …)), where cv1's output holds the first pieces, each block reads
/// the previous piece (at first cv1's last `tail` channels) and `last` joins them all.
/// x: [c1, H, W] → [last.channels, H, W].
struct Chain<Block: ChainBlock>: Sendable {
    let first: Conv, last: Conv
    let blocks: [Block]
    /// Channels of cv1's last piece, the first block's input.
    let tail: Int

    var convs: [Conv] { [first, last] + blocks.flatMap(\.convs) }

    /// cv1 writes the front of `last`'s input, each block the next piece. The output goes into `y`
    /// when given, else into a map of `ws` allocated once the blocks are done; x is released after
    /// cv1 when `consuming` (its last reader). Each piece's range bounds the next block's input,
    /// and together they bound `last`'s (as in `C3k2`).
    func callAsFunction(_ x: Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        let pieces = ws.map(channels: blocks.reduce(first.channels) { $0 + $1.channels }, like: x)
        var end = first.channels
        let head = first(x, into: pieces.channels(0..<end), ws)
        ws.observe(first.name, head)
        if consuming { ws.release(x) }
        var piece = pieces.channels((end - tail)..<end).bounded(by: head.range), range = head.range
        for block in blocks {
            piece = block(piece, into: pieces.channels(end..<(end + block.channels)), ws)
            ws.observe(block.name, piece)
            range = .union(range, piece.range)
            end += block.channels
        }
        let out = last(pieces.bounded(by: range), into: y ?? last.output(pieces, ws), ws)
        ws.release(pieces)
        return out
    }
}
