import YOLONet
