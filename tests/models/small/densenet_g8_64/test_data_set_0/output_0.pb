
BoutputJ(…Ÿ«¾÷fo¾«Íy>'¹Ì=Ò¿(¾vÉH=jua>Þ¿A= –>yÃŒ¾