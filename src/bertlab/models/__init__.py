"""The networks: the BERT encoder (Hugging Face's ``BertModel`` layout), recurrent encoders with the same
output, task heads and ``TaskModel`` (encoder + head), LoRA adapters, and the mapping to and from Hugging
Face checkpoint files. Nothing here knows about data files, Lightning or the command line."""
