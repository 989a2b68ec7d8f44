print("yolo: not yet implemented")
