import string
import textwrap
print(string.ascii_lowercase[:5], string.digits, string.Template("$who likes $what").substitute(who="ann", what="tea"))
print(textwrap.wrap("the quick brown fox jumps over the lazy dog", 10), textwrap.dedent("  a\n  b"), textwrap.shorten("hello world again", 12))
print(string.capwords("hello there"), string.Formatter().format("{0}-{x}", 1, x=2))
