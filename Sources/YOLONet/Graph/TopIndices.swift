/// Indices of the `k` largest values, largest first; ties keep the lower index first.
///
/// (value descending, index ascending) is a strict total order on the indices, so keeping the
/// first k in that order while scanning, then sorting them, gives exactly the prefix of the full
/// sort, in O(n + k log k · log(n / k)) instead of O(n log n).
package func topIndices(_ values: [Float], _ k: Int) -> [Int] {
    var order = [Int](repeating: 0, count: values.count)
    let k = values.withUnsafeBufferPointer { v in
        order.withUnsafeMutableBufferPointer { topIndices(v.baseAddress!, count: v.count, k, order: $0.baseAddress!) }
    }
    return Array(order.prefix(k))
}

/// `topIndices` on buffers: the first min(k, count) entries of `order` (room for `count`) are
/// the indices; returns how many.
///
/// o[0..<k] is a heap of the first k so far, the last of them in the order at its root: a later
/// index enters only if it goes before the root, one comparison with a value in a register for
/// most, where a quickselect would move indices and read their values through them.
@discardableResult
package func topIndices(_ v: UnsafePointer<Float>, count: Int, _ k: Int, order o: UnsafeMutablePointer<Int>) -> Int {
    let k = min(max(k, 0), count)
    guard k > 0 else { return 0 }
    func before(_ i: Int, _ j: Int) -> Bool { v[i] > v[j] || (v[i] == v[j] && i < j) }
    /// Restores the heap of o[0..<n] below position i (each entry after its children in the order).
    func siftDown(_ i: Int, _ n: Int) {
        var i = i
        while 2 * i + 1 < n {
            var child = 2 * i + 1
            if child + 1 < n && before(o[child], o[child + 1]) { child += 1 }
            guard before(o[i], o[child]) else { return }
            (o[i], o[child]) = (o[child], o[i])
            i = child
        }
    }
    for i in 0..<k {
        o[i] = i
        var j = i
        while j > 0 && before(o[(j - 1) / 2], o[j]) {
            (o[j], o[(j - 1) / 2]) = (o[(j - 1) / 2], o[j])
            j = (j - 1) / 2
        }
    }
    // A later index goes before the root only with a larger value (equal ones have the lower index).
    var last = v[o[0]]
    for i in k..<count where v[i] > last {
        o[0] = i
        siftDown(0, k)
        last = v[o[0]]
    }
    // Heap sort: the last of the order to the end, one at a time.
    for end in stride(from: k - 1, to: 0, by: -1) {
        (o[0], o[end]) = (o[end], o[0])
        siftDown(0, end)
    }
    return k
}
