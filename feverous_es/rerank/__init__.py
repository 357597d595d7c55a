"""ONNX cross-encoders that rerank evidence candidates (built with the pipeline issue)."""
