"""Parts several formats share: payload arenas, k-way merges, damage reports."""
