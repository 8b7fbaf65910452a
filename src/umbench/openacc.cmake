# OpenACC variants: filled in below.
