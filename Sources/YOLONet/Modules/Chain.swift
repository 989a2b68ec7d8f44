import Tensor

/// The aggregation of the C2f family (C2f, C3k2, C2fCIB, A2C2f, RepNCSPELAN4, ELAN1):
/// last(cat(first(x), b₁(·), b₂(·), …)), where first's output holds the first pieces (two halves in
/// C2f, one piece in A2C2f), each block reads the previous piece (at first, first's last `tail`
/// channels) and writes one of its own channels, and `last` joins them all.
/// x: [c1, H, W] → [last.channels, H, W].
struct Chain: Sendable {
    let first: Conv, last: Conv
    let blocks: [any CSPBlock]
    /// Channels of first's last piece, the first block's input.
    let tail: Int

    var channels: Int { last.channels }
    var convs: [Conv] { [first, last] + blocks.convs }
    var attention: [Attention] { blocks.attention }

    /// 2 × multiply-adds of its convolutions and attention for an output of plane `output`.
    func flops(_ output: Plane) -> Double {
        attention.reduce(convs.flops(output)) { $0 + $1.matmulFLOPs(positions: output.height * output.width) }
    }

    /// first writes the front of `last`'s input, each block the next piece, in place. The output
    /// goes into `y` when given, else into a map of `ws` allocated once the blocks are done; x is
    /// released after first when `consuming` (this is its last reader): the module then holds its
    /// input, pieces and output at different times, which lowers yolo26n's peak.
    /// Each piece's range bounds the next block's input, and together they bound `last`'s (none
    /// when a block returns none, `CSPBlock`).
    func callAsFunction(_ x: Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        run(like: x, into: y, ws) { head in
            defer { if consuming { ws.release(x) } }
            return first(x, into: head, ws)
        }
    }

    /// The chain on the concatenation of `coarse` upsampled and `rest` (first split,
    /// `Conv.splitsUpsampledFront`).
    func callAsFunction(coarse: Map, rest: Map, into y: Map?, _ ws: Workspace) -> Map {
        run(like: rest, into: y, ws) { first(coarse: coarse, rest: rest, into: $0, ws) }
    }

    /// The chain after `head` has written first's output into the map it is given.
    private func run(like x: Map, into y: Map?, _ ws: Workspace, head: (Map) -> Map) -> Map {
        let pieces = ws.map(channels: blocks.reduce(first.channels) { $0 + $1.channels }, like: x)
        var end = first.channels
        let front = head(pieces.channels(0..<end))
        ws.observe(first.name, front)
        var piece = pieces.channels((end - tail)..<end).bounded(by: front.range), range = front.range
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
