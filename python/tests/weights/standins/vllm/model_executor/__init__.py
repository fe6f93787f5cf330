"""Stand-in for vllm.model_executor (a package holding model_loader)."""
