"""ONNX cross-encoders that rerank evidence candidates."""
