print("yolo-bench: not yet implemented")
