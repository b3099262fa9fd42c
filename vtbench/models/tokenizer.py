"""A character-level tokenizer saved as an ordinary ``tokenizer.json``.

Every printable ASCII character, newline and tab is one token, so the tiny model can
spell out digits, JSON and programs exactly. Built with the ``tokenizers`` library and
wrapped in ``PreTrainedTokenizerFast`` so trl, peft, mergekit and the server load it with
``AutoTokenizer`` like any other.
"""

import string
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ["<pad>", "<bos>", "<eos>", "<unk>"]
CHARACTERS = ["\n", "\t", *(c for c in string.printable if c.isprintable())]
# The chat template lets /v1/chat/completions work: role-tagged lines, then the assistant.
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def build_char_tokenizer() -> "PreTrainedTokenizerFast":
    from tokenizers import Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS + CHARACTERS)}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    core.decoder = decoders.Fuse()
    core.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
        padding_side="left",
        model_max_length=512,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer
