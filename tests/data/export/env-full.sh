export EMPTY=''
export SPACES='a b  c'
export SQ='it'"'"'s'
export DQ='say "hi"'
export DOLLAR='$HOME ${X} $$'
export TICK='`id`'
export HASH='# not a comment'
export EQ=a=b=c
export BACKSLASH='a\nb\'
export UNI='Grüße ☃'
export YAML='key: [x]'
export OPENAI_API_KEY=sk-4f1d9e
export PLAIN=plain-7a2b
