"""Text for the demo corpus: a word list written for this project and a sentence composer.

Sentences cover lower case, upper case, digits and punctuation. Everything is ASCII (so it is
valid ISO-8859-1 and covered by every Hershey font) and contains no ``%`` (a character the real
IAM-OnDB transcriptions use as a placeholder marker).
"""

from __future__ import annotations

import string

import numpy as np

# Common English words, lower case, chosen to cover the alphabet several times over.
WORDS: tuple[str, ...] = tuple("""
a about above across after again against air all almost along also always among and animal
another answer any apple around ask at away back bad ball be bear because bed been before began
begin behind being below best better between big bird black blue boat body book both box boy
bread bring brown build but buy by cake call came can car carry cat change child city clean
clear close cold come could country cover cross cut dance dark day deep did different do dog
done door down draw dream dress drink drive dry each early earth easy eat egg end enough even
evening every eye face fact fall family far farm fast father feel few field find fine fire first
fish five fix fly follow food foot for forest form found four fox free friend from front full
game garden gave get girl give glass go gold good got great green grow had half hand happy hard
has have he head hear heavy help her here high hill him his hold home horse hot hour house how
idea if important in inside into is it its job join jump just keep kept key kind king kitchen
knew know lake land large last late laugh lazy learn leave left less letter light like line list
little live long look lost love low made make man many map mark may me mean milk mind minute
miss money month moon more morning most mother mountain move much music must my name near need
never new next nice night no north not note nothing now number of off often oil old on once one
only open or order other our out over own page paper park part party pass past pay people pick
picture piece place plan plant play please point poor quick quiet quite quiz rain ran read ready
real red remember rest rich ride right river road rock room round run said same sat saw say
school sea second see seem self send set seven shall she ship short should show side simple sing
sister sit six size sky sleep slow small snow so some song soon sound south speak spring square
stand star start stay step still stone stop story street strong study such summer sun sure swim
table take talk tall tea teach tell ten than that the their them then there these they thing
think this those though three through time to today together told too took top town tree true
try turn two under until up upon us use very view visit voice wait walk wall want warm was
wash watch water wave way we weather week well went were west what wheel when where which while
white who whole why wide wild will wind window winter wish with without woman wonder wood word
work world would write wrong yard year yellow yes yet you young your zero zone zoo jazz jacket
jelly jewel juice queen quest quarter quick quote zebra zigzag box fix mix next oxygen extra
""".split())

# Proper nouns (invented or generic), so that every upper-case letter starts some word.
NAMES: tuple[str, ...] = (
    "Alice", "Bruno", "Clara", "David", "Emma", "Felix", "Greta", "Hugo", "Ida", "Jonas",
    "Karl", "Lena", "Marco", "Nora", "Oscar", "Paula", "Quentin", "Rosa", "Simon", "Tara",
    "Ulla", "Victor", "Wanda", "Xavier", "Yusuf", "Zoe", "London", "Paris", "Oslo", "Quebec",
    "Vienna", "York", "Zurich", "Monday", "Friday", "June", "April", "Easter", "Kent",
)

ACRONYMS: tuple[str, ...] = ("BBC", "UK", "USA", "TV", "DJ", "PhD", "OK", "XML", "EU", "FAQ")

CONTRACTIONS: tuple[str, ...] = (
    "don't", "it's", "I'm", "we're", "can't", "isn't", "you'll", "they've", "she'd", "won't",
)

END_MARKS: tuple[str, ...] = (".", ".", ".", "!", "?", "", ";", ":")

# Every character a demo line can hold: the word lists, the numbers (digits, ":" and "."), the
# decorations (",", quotes, brackets), hyphenated pairs and the end marks.
CORPUS_CHARACTERS: frozenset[str] = frozenset(
    "".join(WORDS + NAMES + ACRONYMS + CONTRACTIONS + END_MARKS) + string.digits + ',"()-:.')

GLYPH_ALPHABET: str = string.ascii_lowercase + string.ascii_uppercase + string.digits
GLYPHS_PER_LINE: int = 9
GLYPH_REPEAT: int = 3


def _number(rng: np.random.Generator) -> str:
    """A number token: a count, a year, a time or a price."""
    kind = int(rng.integers(4))
    if kind == 0:
        return str(int(rng.integers(2, 100)))
    if kind == 1:
        return str(int(rng.integers(1890, 2030)))
    if kind == 2:
        return f"{int(rng.integers(1, 13))}:{int(rng.integers(0, 60)):02d}"
    return f"{int(rng.integers(1, 500))}.{int(rng.integers(0, 100)):02d}"


def _token(rng: np.random.Generator) -> str:
    """One word-like token (mostly common words, sometimes names, numbers, contractions)."""
    u = float(rng.random())
    if u < 0.74:
        return WORDS[int(rng.integers(len(WORDS)))]
    if u < 0.86:
        return NAMES[int(rng.integers(len(NAMES)))]
    if u < 0.92:
        return _number(rng)
    if u < 0.96:
        return CONTRACTIONS[int(rng.integers(len(CONTRACTIONS)))]
    if u < 0.98:
        return ACRONYMS[int(rng.integers(len(ACRONYMS)))]
    a, b = (WORDS[int(i)] for i in rng.integers(len(WORDS), size=2))
    return f"{a}-{b}"


def _decorate(words: list[str], rng: np.random.Generator) -> list[str]:
    """Capitalise the first word and add inner punctuation (commas, quotes, brackets)."""
    words = list(words)
    words[0] = words[0][:1].upper() + words[0][1:]
    if len(words) > 3 and rng.random() < 0.35:
        i = int(rng.integers(1, len(words) - 1))
        words[i] += ","
    if len(words) > 3 and rng.random() < 0.08:
        i = int(rng.integers(1, len(words) - 1))
        words[i] = f'"{words[i]}"'
    elif len(words) > 3 and rng.random() < 0.06:
        i = int(rng.integers(1, len(words) - 1))
        words[i] = f"({words[i]})"
    return words


def compose_sentence(rng: np.random.Generator, min_chars: int = 20, max_chars: int = 60) -> str:
    """A sentence-like line of ``min_chars`` to ``max_chars`` characters, spaces included."""
    if not 1 <= min_chars <= max_chars:
        raise ValueError(f"bad sentence length range [{min_chars}, {max_chars}]")
    target = int(rng.integers(min_chars, max_chars + 1))
    for _ in range(100):
        words: list[str] = []
        length = -1
        while length < target - 2:
            tok = _token(rng)
            if length + 1 + len(tok) > max_chars - 1:
                break
            words.append(tok)
            length += 1 + len(tok)
        if not words:
            continue
        words = _decorate(words, rng)
        text = " ".join(words) + END_MARKS[int(rng.integers(len(END_MARKS)))]
        if min_chars <= len(text) <= max_chars:
            return text
    raise RuntimeError(f"could not compose a sentence of {min_chars}-{max_chars} characters")


def glyph_lines(n_lines: int) -> list[str]:
    """BRUSH-style isolated-glyph lines (``"aaa bbb ccc"``), lower case first.

    The glyph alphabet (lower case, upper case, digits) is cut into chunks of
    :data:`GLYPHS_PER_LINE` symbols; line ``k`` writes chunk ``k`` (wrapping around), so three
    lines cover the lower-case alphabet (the third ends with ``A``) and seven cover all
    62 symbols.
    """
    chunks = [GLYPH_ALPHABET[i:i + GLYPHS_PER_LINE]
              for i in range(0, len(GLYPH_ALPHABET), GLYPHS_PER_LINE)]
    return [" ".join(c * GLYPH_REPEAT for c in chunks[k % len(chunks)]) for k in range(n_lines)]
