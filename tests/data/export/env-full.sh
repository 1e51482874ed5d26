export ENVMAN_ENV_EMPTY=''
export ENVMAN_ENV_SPACES='a b  c'
export ENVMAN_ENV_SQ='it'"'"'s'
export ENVMAN_ENV_DQ='say "hi"'
export ENVMAN_ENV_DOLLAR='$HOME ${X} $$'
export ENVMAN_ENV_TICK='`id`'
export ENVMAN_ENV_HASH='# not a comment'
export ENVMAN_ENV_EQ=a=b=c
export ENVMAN_ENV_BACKSLASH='a\nb\'
export ENVMAN_ENV_UNI='Grüße ☃'
export ENVMAN_ENV_YAML='key: [x]'
export ENVMAN_ENV_OPENAI_API_KEY=sk-4f1d9e
export ENVMAN_ENV_PLAIN=plain-7a2b
