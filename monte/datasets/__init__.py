"""Datasets: frozen piles of rows (JSONL), what an ``sft`` recipe trains on."""
