/// Plain implementations: the oracles the fast kernels are tested against. Each kernel's file
/// extends it with its own (`Reference.conv2d` in Conv2D.swift, …).
public enum Reference {}
